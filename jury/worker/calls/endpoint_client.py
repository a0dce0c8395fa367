"""Asking an HTTP endpoint candidate (schemas.candidates.HTTPCandidate) for its answer.

Every way the call can fail (a connection refused, a timeout, an HTTP error status, a reply
that is not JSON, nothing at the answer path) becomes the answer text, marked by its kind, as
the LLM judge evaluator captures an API error and has it judged. The endpoint is not trusted:
`timeout_s` bounds the whole call, however slowly its reply trickles in, and a reply is read
up to MAX_REPLY_BYTES, never whole. `${VAR}` placeholders in the
URL and headers are expanded here, in the worker's environment, and kept out of any text
stored.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

import httpx

from jury.schemas.candidates import (
    AnswerNotFound,
    HTTPCandidate,
    answer_at,
    error_answer,
    request_body,
)
from jury.schemas.placeholders import PlaceholderError, expand_text, redact
from jury.store.generations import Generation

# How much of an error reply's body is kept in the answer text.
ERROR_BODY_CHARS = 500
# The most of a reply read: an answer is cut at MAX_ANSWER_CHARS (up to 4 bytes each) anyway.
MAX_REPLY_BYTES = 8 * 1024 * 1024


class ReplyTooLarge(Exception):
    pass


async def ask_endpoint(candidate: HTTPCandidate, text: str) -> Generation:
    """The endpoint's answer to `text`, or its failure as the answer; never raises for the
    endpoint's sake."""
    try:
        url, headers, secrets = _expanded(candidate)
    except PlaceholderError as exc:
        return _failed(candidate, "missing_env", f"{exc} on this worker", 0.0)
    try:  # the stored batch was checked so when read; checked again by the same function
        body = request_body(candidate, text)
    except ValueError as exc:
        return _failed(candidate, "bad_request", str(exc), 0.0)
    started = time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=candidate.timeout_s) as client:
            # httpx's timeout bounds each read; the deadline bounds the exchange, trickle or
            # not (the client's own setup, an SSL context, is not the endpoint's time).
            async with asyncio.timeout(candidate.timeout_s):
                status, content = await _exchange(client, candidate, url, headers, body)
    except (TimeoutError, httpx.TimeoutException):
        detail = f"no answer within timeout_s={candidate.timeout_s:g} s"
        return _failed(candidate, "timeout", detail, _ms(started))
    except ReplyTooLarge:
        detail = f"the reply is larger than {MAX_REPLY_BYTES // (1024 * 1024)} MiB"
        return _failed(candidate, "too_large", detail, _ms(started))
    except httpx.HTTPError as exc:
        detail = redact(f"{type(exc).__name__}: {exc}", secrets)
        return _failed(candidate, "connection", detail, _ms(started))
    latency = _ms(started)
    text = content.decode("utf-8", errors="replace")
    if status >= 400:
        shown = redact(text[:ERROR_BODY_CHARS], secrets)
        return _failed(candidate, f"http_{status}", f"HTTP {status}: {shown}", latency)
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python parses
        shown = redact(text[:ERROR_BODY_CHARS], secrets)
        return _failed(candidate, "bad_json", f"the reply is not JSON: {shown}", latency)
    try:
        answer = answer_at(parsed, candidate.answer_path)
    except AnswerNotFound as exc:
        return _failed(candidate, "missing_answer", str(exc), latency)
    return Generation(candidate.name, answer, latency_ms=latency)


async def _exchange(
    client: httpx.AsyncClient,
    candidate: HTTPCandidate,
    url: str,
    headers: dict[str, str],
    body: object,
) -> tuple[int, bytes]:
    """The reply's status and body, read in chunks up to MAX_REPLY_BYTES."""
    request = client.build_request(candidate.method, url, headers=headers, json=body)
    reply = await client.send(request, stream=True)
    try:
        content = bytearray()
        async for chunk in reply.aiter_bytes():  # decoded: a gzip reply counts unzipped
            content += chunk
            if len(content) > MAX_REPLY_BYTES:
                raise ReplyTooLarge
    finally:
        await reply.aclose()
    return reply.status_code, bytes(content)


def _expanded(candidate: HTTPCandidate) -> tuple[str, dict[str, str], tuple[str, ...]]:
    url = expand_text(candidate.url, os.environ)
    secrets = list(url.secrets)
    headers = {}
    for name, value in candidate.headers.items():
        expanded = expand_text(value, os.environ)
        headers[name] = expanded.text
        secrets += expanded.secrets
    return url.text, headers, tuple(secrets)


def _failed(candidate: HTTPCandidate, kind: str, detail: str, latency_ms: float) -> Generation:
    return Generation(candidate.name, error_answer(kind, detail), kind, latency_ms)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
