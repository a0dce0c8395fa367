"""A TCP proxy on loopback in front of a real server (PostgreSQL, Redis) that a test cuts for a
while: every connection through it is reset and new ones are refused until it is back, as
when the server restarts. The server itself, shared with other tests, is never touched."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from urllib.parse import urlsplit, urlunsplit

POLL_S = 0.2
CHUNK = 65536


class CuttableProxy:
    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.port = 0
        self.up()

    @classmethod
    def before(cls, url: str) -> tuple[CuttableProxy, str]:
        """A proxy to the server of `url`, and the same URL through the proxy."""
        parts = urlsplit(url)
        proxy = cls(parts.hostname or "127.0.0.1", parts.port or 0)
        credentials, _, _ = parts.netloc.rpartition("@")
        netloc = f"{credentials}@" if credentials else ""
        return proxy, urlunsplit(parts._replace(netloc=f"{netloc}127.0.0.1:{proxy.port}"))

    def up(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(POLL_S)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        """Refuse new connections and reset every open one."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            open_sockets, self._sockets = self._sockets, set()
        for sock in open_sockets:
            _reset(sock)

    close = down

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _reset(client)
                continue
            client.settimeout(None)
            server.settimeout(None)
            with self._lock:
                self._sockets |= {client, server}
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(CHUNK):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with self._lock:
                self._sockets.discard(sock)
            _reset(sock)


def _reset(sock: socket.socket) -> None:
    """Close at once, as a server that went away leaves its clients: shutdown() ends the
    connection even while a pump thread is blocked reading it (close() alone would wait for
    that thread), then the close sends a reset (RST)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
