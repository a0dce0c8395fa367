"""Asking an HTTP endpoint candidate (schemas.candidates.HTTPCandidate) for its answer.

Every way the call can fail (a connection refused, a timeout, an HTTP error status, a reply
that is not JSON, nothing at the answer path) becomes the answer text, marked by its kind, as
the LLM judge evaluator captures an API error and has it judged. The endpoint is not trusted:
`timeout_s` bounds the whole call, however slowly its reply trickles in, and a reply is read
up to MAX_REPLY_BYTES, decoded, never whole. `${VAR}` placeholders in the URL and headers
are expanded here, in the worker's environment, and kept out of any text stored.

The egress policy (jury.schemas.egress) is the worker's, not the batch's: the endpoint is
reached only if the operator allows its host (loopback and private addresses are not, by
default), a placeholder takes only a variable allowed to go there, and a redirect is never
followed (jury.worker.calls.guarded_transport). A refusal is the answer, kind
`egress_refused`, and nothing is sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

import httpx

from jury.errors import EgressRefused
from jury.schemas.candidates import (
    AnswerNotFound,
    HTTPCandidate,
    answer_at,
    endpoint_variables,
    error_answer,
    request_body,
)
from jury.schemas.egress import EgressPolicy, plan_endpoint_call
from jury.schemas.placeholders import PlaceholderError, expand_text, redact
from jury.store.generations import Generation
from jury.worker.calls.egress_guard import CallGuard, environment_policy
from jury.worker.calls.guarded_transport import (
    MAX_REPLY_BYTES,
    GuardedTransport,
    ReplyRefused,
)

# How much of an error reply's body is kept in the answer text.
ERROR_BODY_CHARS = 500


def endpoint_guard(candidate: HTTPCandidate, url: str, egress: EgressPolicy) -> CallGuard:
    """The candidate's call as the policy allows it (EgressRefused otherwise): its URL's host
    may be reached, and every variable its URL and headers take may go there. The addresses
    are checked at the request, by the transport."""
    what = f"candidate {candidate.name}"
    carried = endpoint_variables(candidate, os.environ)
    plan_endpoint_call(egress, what, url, carried)
    return CallGuard(egress, carried, what)


async def ask_endpoint(
    candidate: HTTPCandidate, text: str, egress: EgressPolicy | None = None
) -> Generation:
    """The endpoint's answer to `text`, or its failure as the answer; never raises for the
    endpoint's sake. `egress`: the worker's policy (its runtime passes it), else this
    process's environment's."""
    try:
        url, headers, secrets = _expanded(candidate)
    except PlaceholderError as exc:
        return _failed(candidate, "missing_env", f"{exc} on this worker", 0.0)
    try:
        guard = endpoint_guard(candidate, url, egress or environment_policy())
    except EgressRefused as exc:  # the URL's host may be a placeholder's value
        return _failed(candidate, exc.kind, redact(str(exc), secrets), 0.0)
    try:  # the stored batch was checked so when read; checked again by the same function
        body = request_body(candidate, text)
    except ValueError as exc:
        return _failed(candidate, "bad_request", str(exc), 0.0)
    transport = GuardedTransport(httpx.AsyncHTTPTransport(), guard)
    started = time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=candidate.timeout_s, transport=transport) as client:
            # httpx's timeout bounds each read; the deadline bounds the exchange, trickle or
            # not (the client's own setup, an SSL context, is not the endpoint's time).
            async with asyncio.timeout(candidate.timeout_s):
                status, content = await _exchange(client, candidate, url, headers, body)
    except (TimeoutError, httpx.TimeoutException):
        detail = f"no answer within timeout_s={candidate.timeout_s:g} s"
        return _failed(candidate, "timeout", detail, _ms(started))
    except ReplyRefused as exc:
        return _failed(candidate, "too_large", str(exc), _ms(started))
    except EgressRefused as exc:  # a redirect, or a name that resolved where it may not go
        return _failed(candidate, exc.kind, redact(str(exc), secrets), _ms(started))
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
    """The reply's status and body, decoded up to MAX_REPLY_BYTES (by the transport)."""
    request = client.build_request(candidate.method, url, headers=headers, json=body)
    reply = await client.send(request, stream=True)
    try:
        content = bytearray()
        async for chunk in reply.aiter_bytes():
            content += chunk
    finally:
        await reply.aclose()
    assert len(content) <= MAX_REPLY_BYTES
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
