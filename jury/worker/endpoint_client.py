"""Asking an HTTP endpoint candidate (schemas.candidates.HTTPCandidate) for its answer.

Every way the call can fail (a connection refused, a timeout, an HTTP error status, a reply
that is not JSON, nothing at the answer path) becomes the answer text, marked by its kind, as
the LLM judge evaluator captures an API error and has it judged. `${VAR}` placeholders in the
URL and headers are expanded here, in the worker's environment, and kept out of any text
stored.
"""

from __future__ import annotations

import json
import os
import time

import httpx

from jury.schemas.candidates import (
    AnswerNotFound,
    HTTPCandidate,
    answer_at,
    error_answer,
    fill_body,
)
from jury.schemas.placeholders import PlaceholderError, expand_text, redact
from jury.store.generations import Generation

# How much of an error reply's body is kept in the answer text.
ERROR_BODY_CHARS = 500


async def ask_endpoint(candidate: HTTPCandidate, text: str) -> Generation:
    """The endpoint's answer to `text`, or its failure as the answer; never raises for the
    endpoint's sake."""
    try:
        url, headers, secrets = _expanded(candidate)
    except PlaceholderError as exc:
        return _failed(candidate, "missing_env", f"{exc} on this worker", 0.0)
    body = None if candidate.method == "GET" else fill_body(candidate.body, text)
    started = time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=candidate.timeout_s) as client:
            reply = await client.request(candidate.method, url, headers=headers, json=body)
    except httpx.TimeoutException:
        detail = f"no answer within timeout_s={candidate.timeout_s:g} s"
        return _failed(candidate, "timeout", detail, _ms(started))
    except httpx.HTTPError as exc:
        detail = redact(f"{type(exc).__name__}: {exc}", secrets)
        return _failed(candidate, "connection", detail, _ms(started))
    latency = _ms(started)
    if reply.status_code >= 400:
        shown = redact(reply.text[:ERROR_BODY_CHARS], secrets)
        status = reply.status_code
        return _failed(candidate, f"http_{status}", f"HTTP {status}: {shown}", latency)
    try:
        parsed = json.loads(reply.text)
    except ValueError:
        shown = redact(reply.text[:ERROR_BODY_CHARS], secrets)
        return _failed(candidate, "bad_json", f"the reply is not JSON: {shown}", latency)
    try:
        answer = answer_at(parsed, candidate.answer_path)
    except AnswerNotFound as exc:
        return _failed(candidate, "missing_answer", str(exc), latency)
    return Generation(candidate.name, answer, latency_ms=latency)


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
