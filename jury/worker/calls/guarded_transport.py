"""httpx transports that send a request only where the egress policy allows, never follow a
redirect, and read a reply only up to a bound, however it is compressed.

Wrapped around whatever transport a client has (httpx's own, or LiteLLM's aiohttp one), they
serve every httpx client a worker sends through: LiteLLM's (jury.worker.calls.llm_client
installs them), the HTTP endpoint candidates' (jury.worker.calls.endpoint_client) and the
Batch API's (jury.worker.calls.batch_client). Each request is checked and pinned to its
checked address (jury.worker.calls.egress_guard).

A reply's body is decoded here, not by httpx: httpx inflates a gzip chunk whole, so a body of
a few hundred KiB became 200 MB in one step through `http_client: litellm`. Here zlib inflates
at most INFLATE_STEP bytes at a time and the reading stops at the bound. Only gzip and
deflate are asked for (`Accept-Encoding`); a reply in another encoding is refused.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Final

import httpx

from jury.schemas.egress_hosts import Destination, IPAddress
from jury.worker.calls.egress_guard import (
    REDIRECT_STATUSES,
    CallGuard,
    connect_address,
    connect_address_sync,
    current_guard,
    redirect_refused,
    request_destination,
)

# The most of a reply read, decoded: an answer is cut at MAX_ANSWER_CHARS (up to 4 bytes
# each) anyway, and a chat completion is a few KiB.
MAX_REPLY_BYTES: Final = 8 * 1024 * 1024
# A request's own bound, for a reply known to be larger (a Batch API output file):
# `extensions={REPLY_LIMIT: n}`.
REPLY_LIMIT: Final = "jury_reply_limit"
INFLATE_STEP: Final = 64 * 1024
ACCEPTED_ENCODINGS: Final = "gzip, deflate"


class ReplyRefused(Exception):
    """A reply jury will not read: in an encoding it did not ask for, or too large."""


class ReplyTooLarge(ReplyRefused):
    """A reply's body, decoded, passed its bound."""


class _Inflater:
    """A reply body's bytes as decoded bytes, at most `limit` of them in all."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.limit = limit
        self.total = 0
        name = encoding.strip().lower()
        self._zlib: zlib._Decompress | None
        if name in ("", "identity"):
            self._zlib = None
        elif name in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif name == "deflate":
            self._zlib = zlib.decompressobj(32 + zlib.MAX_WBITS)  # zlib or gzip header
        else:
            raise ReplyRefused(f"the reply is in an encoding jury did not ask for: {name[:40]!r}")

    def _count(self, data: bytes) -> bytes:
        self.total += len(data)
        if self.total > self.limit:
            raise ReplyTooLarge(f"the reply is larger than {self.limit >> 20} MiB")
        return data

    def feed(self, data: bytes) -> Iterator[bytes]:
        """`data`'s decoded bytes, a step at a time (none empty)."""
        if self._zlib is None:
            yield self._count(data)
            return
        pending = data
        try:
            while pending:
                part = self._count(self._zlib.decompress(pending, INFLATE_STEP))
                if part:
                    yield part
                pending = self._zlib.unconsumed_tail
        except zlib.error as exc:
            raise httpx.DecodingError(f"the reply's compressed body is corrupt: {exc}") from None

    def end(self) -> Iterator[bytes]:
        # What zlib holds back is at most its window: the input was consumed step by step.
        tail = self._count(self._zlib.flush()) if self._zlib is not None else b""
        if tail:
            yield tail


class _BoundedAsyncStream(httpx.AsyncByteStream):
    def __init__(self, raw: httpx.AsyncByteStream, inflater: _Inflater) -> None:
        self._raw = raw
        self._inflater = inflater

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._raw:
            for part in self._inflater.feed(chunk):
                yield part
        for part in self._inflater.end():
            yield part

    async def aclose(self) -> None:
        await self._raw.aclose()


class _BoundedSyncStream(httpx.SyncByteStream):
    def __init__(self, raw: Iterable[bytes], inflater: _Inflater) -> None:
        self._raw = raw
        self._inflater = inflater

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._raw:
            yield from self._inflater.feed(chunk)
        yield from self._inflater.end()

    def close(self) -> None:
        close = getattr(self._raw, "close", None)
        if close is not None:
            close()


def _prepared(guard: CallGuard, request: httpx.Request) -> Destination:
    """The request checked (EgressRefused otherwise), asking for the encodings we decode."""
    url = request.url
    dest = request_destination(guard, url.scheme, url.raw_host.decode("ascii"), url.port)
    request.headers["Accept-Encoding"] = ACCEPTED_ENCODINGS
    return dest


def _pin(request: httpx.Request, dest: Destination, address: IPAddress | None) -> None:
    """Send the request to `address`, the one checked; its Host header (set by httpx from
    the URL as written) and TLS server name stay the name's."""
    if address is None or dest.address is not None:
        return
    request.url = request.url.copy_with(host=str(address))
    if dest.scheme == "https":
        # httpcore and LiteLLM's aiohttp transport both take the TLS server name from here.
        request.extensions = {**request.extensions, "sni_hostname": dest.host}


def _unresolved(dest: Destination, exc: OSError, request: httpx.Request) -> httpx.ConnectError:
    return httpx.ConnectError(f"{dest.host}: {exc}", request=request)


def _redirect(guard: CallGuard, dest: Destination, response: httpx.Response) -> Exception:
    location = response.headers.get("location", "")
    return redirect_refused(guard, dest, response.status_code, location)


def _inflater(request: httpx.Request, response: httpx.Response, default: int) -> _Inflater:
    limit = request.extensions.get(REPLY_LIMIT)
    encoding = response.headers.get("content-encoding", "")
    return _Inflater(encoding, limit if isinstance(limit, int) else default)


def _decoded(
    response: httpx.Response,
    request: httpx.Request,
    stream: httpx.AsyncByteStream | httpx.SyncByteStream,
) -> httpx.Response:
    """The response with its body decoded by `stream`: no encoding, no length left to apply."""
    dropped = (b"content-encoding", b"content-length")
    headers = [(k, v) for k, v in response.headers.raw if k.lower() not in dropped]
    status, extensions = response.status_code, response.extensions
    return httpx.Response(
        status, headers=headers, stream=stream, request=request, extensions=extensions
    )


class GuardedTransport(httpx.AsyncBaseTransport):
    """`inner`, behind the egress policy and the reply bound. `guard`: the call's, or None to
    take the one in context (LiteLLM's clients, shared by every call of the process)."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        guard: CallGuard | None = None,
        limit: int = MAX_REPLY_BYTES,
    ) -> None:
        self.inner = inner
        self.guard = guard
        self.limit = limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        guard = self.guard or current_guard()
        dest = _prepared(guard, request)
        try:
            address = await connect_address(guard, dest)
        except OSError as exc:
            raise _unresolved(dest, exc, request) from None
        _pin(request, dest, address)
        response = await self.inner.handle_async_request(request)
        if response.status_code in REDIRECT_STATUSES:
            await response.aclose()
            raise _redirect(guard, dest, response)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        bounded = _BoundedAsyncStream(response.stream, _inflater(request, response, self.limit))
        return _decoded(response, request, bounded)

    async def aclose(self) -> None:
        await self.inner.aclose()


class GuardedSyncTransport(httpx.BaseTransport):
    """GuardedTransport for a blocking client, with its call's guard."""

    def __init__(
        self, inner: httpx.BaseTransport, guard: CallGuard, limit: int = MAX_REPLY_BYTES
    ) -> None:
        self.inner = inner
        self.guard = guard
        self.limit = limit

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        dest = _prepared(self.guard, request)
        try:
            address = connect_address_sync(self.guard, dest)
        except OSError as exc:
            raise _unresolved(dest, exc, request) from None
        _pin(request, dest, address)
        response = self.inner.handle_request(request)
        if response.status_code in REDIRECT_STATUSES:
            response.close()
            raise _redirect(self.guard, dest, response)
        assert isinstance(response.stream, httpx.SyncByteStream)
        bounded = _BoundedSyncStream(response.stream, _inflater(request, response, self.limit))
        return _decoded(response, request, bounded)

    def close(self) -> None:
        self.inner.close()
