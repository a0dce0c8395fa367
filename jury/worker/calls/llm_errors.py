"""LiteLLM's (and the OpenAI SDK's) exceptions mapped onto jury's transient and permanent
errors, for its retry policy (jury.worker.judging.judge_calls), and the provider's rate-limit
headers read as LiteLLM passes them on. Keys and values taken from the environment are
redacted from every message."""

from __future__ import annotations

import os
import re
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch prices at import

from litellm import exceptions as llm_errors

from jury.errors import EgressRefused, PermanentJudgeError, TransientJudgeError
from jury.schemas.egress import ModelCall
from jury.schemas.placeholders import redact
from jury.worker.calls.guarded_transport import ReplyRefused

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def header_duration(headers: Any, name: str) -> float | None:
    """A duration header as OpenAI writes them (`12ms`, `1s`, `6m0s`), in seconds."""
    if not hasattr(headers, "get"):
        return None
    value = headers.get(f"llm_provider-{name}", headers.get(name))
    parts = _DURATION_PART.findall(str(value)) if value is not None else []
    return sum(float(n) * _UNIT_S[unit] for n, unit in parts) if parts else None


def header_int(headers: Any, name: str) -> int | None:
    """An integer rate-limit header, as LiteLLM passes the provider's headers on."""
    if not hasattr(headers, "get"):
        return None
    value = headers.get(f"llm_provider-{name}", headers.get(name))
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _retry_after(exc: Exception) -> float | None:
    """Seconds the provider asked us to wait. LiteLLM keeps the provider's headers in
    `litellm_response_headers`; its rebuilt `response` may carry none."""
    sources: tuple[Any, ...] = (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
        getattr(exc, "headers", None),
    )
    for headers in sources:
        if not hasattr(headers, "get"):
            continue
        # Retry-After is whole seconds; the request window's reset, when the provider sends
        # it, says to the millisecond when a slot frees: a one-second window's 429 then costs
        # the cluster a few milliseconds of quota, not a second.
        reset = header_duration(headers, "x-ratelimit-reset-requests")
        value = headers.get("retry-after")
        try:
            after = max(0.0, float(value)) if value is not None else None
        except ValueError:
            after = None  # an HTTP date; rare from LLM providers, and backoff still applies
        known = [wait for wait in (after, reset) if wait is not None]
        if known:
            return min(known)
    return None


def classify_error(
    exc: Exception, secret: str | None = None, placeholder_values: tuple[str, ...] = ()
) -> Exception:
    """Map a LiteLLM/OpenAI exception onto jury's transient/permanent errors; the key and
    the values placeholders took from the environment are redacted from its message."""
    secrets = (secret, *placeholder_values) if secret else placeholder_values
    cause = _jury_cause(exc)
    if isinstance(cause, EgressRefused):  # raised at a request, through LiteLLM
        return EgressRefused(redact(str(cause), secrets)[:500], kind=cause.kind)
    if isinstance(cause, ReplyRefused):
        return TransientJudgeError(redact(str(cause), secrets), kind="server_error")
    message = redact(f"{type(exc).__name__}: {exc}", secrets)[:500]
    if isinstance(exc, llm_errors.RateLimitError):
        return TransientJudgeError(message, kind="rate_limited", retry_after=_retry_after(exc))
    if isinstance(exc, llm_errors.Timeout):
        return TransientJudgeError(message, kind="timeout")
    if isinstance(exc, llm_errors.APIConnectionError):
        return TransientJudgeError(message, kind="connection")
    if isinstance(
        exc,
        llm_errors.InternalServerError
        | llm_errors.ServiceUnavailableError
        | llm_errors.BadGatewayError,
    ):
        return TransientJudgeError(message, kind="server_error")
    if isinstance(exc, llm_errors.AuthenticationError | llm_errors.PermissionDeniedError):
        return PermanentJudgeError(message, kind="auth")
    if isinstance(exc, llm_errors.NotFoundError):
        return PermanentJudgeError(message, kind="not_found")
    if isinstance(exc, llm_errors.BadRequestError | llm_errors.UnprocessableEntityError):
        return PermanentJudgeError(message, kind="bad_request")
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 400 <= status < 500 and status not in (408, 409, 429):
        return PermanentJudgeError(message, kind="bad_request")
    return TransientJudgeError(message, kind="provider_error")


def _jury_cause(exc: BaseException) -> BaseException | None:
    """The refusal of jury's own behind an exception LiteLLM (or the OpenAI SDK) raised in its
    place, if any: both keep the exception they wrap as its cause or context (one raised
    `from None` hides its context, as meant)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, EgressRefused | ReplyRefused):
            return current
        seen.add(id(current))
        hidden = current.__suppress_context__
        current = current.__cause__ or (None if hidden else current.__context__)
    return None


def withheld_hint(error: Exception, call: ModelCall) -> Exception:
    """A server that refused the placeholder key jury sent in place of a provider's: say so."""
    if call.withheld is None or getattr(error, "kind", None) != "auth":
        return error
    return PermanentJudgeError(
        f"{error} [jury sent no key: {call.withheld} may go only to the hosts JURY_KEY_HOSTS "
        "lists for it on the workers; name the key in api_key_env, listed for this host]",
        kind="auth",
    )
