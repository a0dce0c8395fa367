"""jury's own HTTP wire to OpenAI-compatible servers, as a LiteLLM provider.

A judge `openai/<model>` with an `api_base` (vLLM, llama.cpp, Ollama, a proxy, the simulator)
is called through `litellm.acompletion` as provider `jury_openai`, registered in LiteLLM's
`custom_provider_map` (its documented extension point: litellm/llms/custom_llm.py, CustomLLM).
LiteLLM still runs its call wrapper, logging and exception types around it; what this module
replaces is the OpenAI SDK's client under it: its request transform and its httpx client took
about 4 ms of CPU per call on the development machine (against the simulator, 2,000 calls,
64 at once: 9.3–9.7 ms per call through `openai/`, 5.2 ms through this wire), which was
most of what kept one worker process from 180 judgments a second.

What the wire keeps of the OpenAI SDK's behaviour, and what it adds:
- the request: `POST {api_base}/chat/completions`, the model and messages, the sampling
  parameters LiteLLM hands over, `Authorization: Bearer <key>`;
- the send gate's wait (jury.worker.calls.send_wait) just before the request is sent, as the
  httpx request hook does for LiteLLM's own client;
- one aiohttp session per event loop, its pool unbounded in connections: the worker's
  in-flight limit is the bound, not the pool (aiohttp's default of 100 would be);
- an error status as LiteLLM's exception of that status, with the provider's rate-limit
  headers (`Retry-After`, `x-ratelimit-*`) kept for jury's retry policy and pacing;
- the reply's rate-limit headers on the response, where LiteLLM puts them
  (`_hidden_params["additional_headers"]`), and its usage;
- a reply read up to MAX_REPLY_BYTES, never whole: a hostile server cannot fill the
  worker's memory (aiohttp inflates a compressed body a step at a time, at most 256 KiB per
  step in aiohttp 3.14's `DeflateBuffer`). The call's deadline is jury's (llm_client:
  `timeout_s` over the call);
- the egress policy: the request goes only where the call's guard allows
  (jury.worker.calls.egress_guard), to the address it checked; a redirect is never followed.

LiteLLM's aiohttp_openai provider was tried first: it drops the usage (0 tokens) and turns
a 429 into a 500 without its Retry-After, so jury could neither bill nor pace with it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import weakref
from typing import Any

import aiohttp
import httpx
import litellm
from litellm import CustomLLM
from litellm import exceptions as llm_errors
from litellm.types.utils import Choices, Message, ModelResponse, Usage

from jury.worker.calls.egress_guard import (
    REDIRECT_STATUSES,
    connect_address,
    current_guard,
    host_header,
    redirect_refused,
    request_destination,
)
from jury.worker.calls.endpoint_client import ERROR_BODY_CHARS
from jury.worker.calls.guarded_transport import MAX_REPLY_BYTES, ReplyTooLarge
from jury.worker.calls.send_wait import at_http_send

PROVIDER = "jury_openai"
# LiteLLM's own settings among the optional params it hands a custom provider: not the model's.
_NOT_SENT = frozenset({"max_retries", "extra_headers", "extra_body", "stream_options"})
_KEPT_HEADERS = ("x-ratelimit-", "retry-after")
_USAGE_FIELDS = ("prompt_tokens", "completion_tokens")
# Where the response carries the usage the server reported, unchecked.
REPORTED_USAGE = "jury_reported_usage"


def wire_model(model: str) -> str:
    """The LiteLLM model name that sends `openai/<name>` through this wire."""
    return f"{PROVIDER}/{model.removeprefix('openai/')}"


@functools.lru_cache(maxsize=1024)
def wire_price(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """What LiteLLM's price map says `openai/<model>` costs for these tokens (None: unknown).
    Cached: the wire prices a reply for LiteLLM's logging, then llm_client asks the same for
    jury's cost."""
    if _free(model):  # a local server jury registered at zero: LiteLLM's pricing, skipped
        return 0.0
    try:
        prompt_usd, completion_usd = litellm.cost_per_token(
            model=f"openai/{model}",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )
    except Exception:
        return None
    return float(prompt_usd + completion_usd)


@functools.lru_cache(maxsize=256)
def _free(model: str) -> bool:
    """Whether the price map gives `openai/<model>` no rate but zeros (llm_client registers
    an unpriced model so before its first call): ~4 % of a loaded worker's CPU went to
    LiteLLM's cost_per_token finding that 0 at every call."""
    entry = litellm.model_cost.get(f"openai/{model}")
    rates = [v for k, v in (entry or {}).items() if k.endswith(("_cost_per_token", "_token_cost"))]
    return bool(rates) and not any(rates)


@functools.cache
def register_wire() -> None:
    """Add the wire to LiteLLM's custom providers, keeping any the process registered."""
    known = [p for p in (litellm.custom_provider_map or []) if p.get("provider") != PROVIDER]
    litellm.custom_provider_map = [*known, {"provider": PROVIDER, "custom_handler": _WIRE}]


_SESSIONS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
    weakref.WeakKeyDictionary()
)


def _session() -> aiohttp.ClientSession:
    """This event loop's session: its connections are kept between calls, per endpoint."""
    loop = asyncio.get_running_loop()
    session = _SESSIONS.get(loop)
    if session is None or session.closed:
        # limit=0: no cap on connections (the worker's in-flight setting bounds the calls);
        # no timeout of aiohttp's own: the caller's deadline bounds the whole call.
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=None)
        )
        _SESSIONS[loop] = session
    return session


async def close_session() -> None:
    """Close this event loop's session, if it has one. Left to the garbage collector, an open
    session logs "Unclosed client session" with a traceback when the process exits."""
    session = _SESSIONS.pop(asyncio.get_running_loop(), None)
    if session is not None and not session.closed:
        await session.close()


async def _read_bounded(reply: aiohttp.ClientResponse) -> bytes:
    content = bytearray()
    async for chunk in reply.content.iter_any():
        content += chunk
        if len(content) > MAX_REPLY_BYTES:
            raise ReplyTooLarge(f"the server's reply is larger than {MAX_REPLY_BYTES >> 20} MiB")
    return bytes(content)


def _shown(body: bytes) -> str:
    """The start of a reply's body, as text, for an error message (at most ERROR_BODY_CHARS)."""
    return body[: ERROR_BODY_CHARS * 4].decode("utf-8", errors="replace")[:ERROR_BODY_CHARS]


def _kept_headers(headers: Any) -> dict[str, str]:
    return {
        name.lower(): value
        for name, value in headers.items()
        if name.lower().startswith(_KEPT_HEADERS)
    }


# LiteLLM's exception for each status its OpenAI provider maps (408, 429: below).
_ERROR_BY_STATUS: dict[int, Any] = {
    400: llm_errors.BadRequestError,
    401: llm_errors.AuthenticationError,
    403: llm_errors.PermissionDeniedError,
    404: llm_errors.NotFoundError,
    422: llm_errors.UnprocessableEntityError,
    502: llm_errors.BadGatewayError,
    503: llm_errors.ServiceUnavailableError,
}


def _status_error(status: int, body: bytes, headers: dict[str, str], model: str) -> Exception:
    """LiteLLM's exception for an error status, as its OpenAI provider raises it."""
    message = f"HTTP {status} from the server: {_shown(body)}"
    common: dict[str, Any] = {"message": message, "model": model, "llm_provider": "openai"}
    response = httpx.Response(status, headers=headers, request=httpx.Request("POST", "http://-"))
    error: Any  # LiteLLM's exception classes, which mypy sees without the headers' attribute
    if status == 408:
        error = llm_errors.Timeout(**common, headers=headers)
    elif status == 429:
        error = llm_errors.RateLimitError(**common, response=response, headers=headers)
    elif status in _ERROR_BY_STATUS or status >= 500:
        kind = _ERROR_BY_STATUS.get(status, llm_errors.InternalServerError)
        error = kind(**common, response=response)
    else:
        error = llm_errors.APIError(status_code=status, **common)
    # Where jury's retry policy reads the provider's headers (llm_client._retry_after).
    error.litellm_response_headers = headers
    return error


def _reply(data: Any, model_response: ModelResponse, model: str) -> ModelResponse:
    """The reply's JSON onto LiteLLM's response; a reply without choices is the server's
    fault (a 502 in kind), not an empty answer."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise llm_errors.BadGatewayError(
            message="the server's reply has no choices", model=model, llm_provider="openai"
        )
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    model_response.choices = [
        Choices(
            finish_reason=choices[0].get("finish_reason") or "stop",
            index=0,
            message=Message(content=content if isinstance(content, str) else None),
        )
    ]
    usage = data.get("usage")
    # The server's figures as it sent them, for jury to check (jury.worker.calls.usage); LiteLLM's
    # own Usage only where they are plain counts, for its logging.
    model_response._hidden_params[REPORTED_USAGE] = usage if isinstance(usage, dict) else None
    if isinstance(usage, dict) and all(
        type(usage.get(name)) is int and usage[name] >= 0 for name in _USAGE_FIELDS
    ):
        # Priced here, by the model's own name: LiteLLM's logging takes a cost it finds on
        # the response instead of pricing the call itself (litellm_logging.py,
        # `response_cost_calculator`: "use cost if already calculated"), ~8 % of a loaded
        # worker's CPU, and would price `jury_openai/<model>`, which it does not know.
        model_response._hidden_params["response_cost"] = wire_price(
            model, usage["prompt_tokens"], usage["completion_tokens"]
        )
        model_response.usage = Usage(**{n: usage[n] for n in _USAGE_FIELDS})  # type: ignore[attr-defined]
    if isinstance(data.get("id"), str):
        model_response.id = data["id"]
    return model_response


def _unobserved(logging_obj: Any) -> bool:
    """Whether no LiteLLM callback would see this call's success. LiteLLM builds its logging
    payload and prices the call a second time for its async success callbacks even when none
    is registered (litellm_logging.py, `Logging._async_success_handler_body`, run through its
    logging worker: read in LiteLLM 1.106): about 1 of 4.7-5.0 ms of CPU per call through the
    wire (against the simulator, 1,500 calls, 64 at once, alternated in one process). With none
    registered, globally (`litellm.callbacks` and `litellm.success_callback`, and the async
    list LiteLLM routes them to) or for the call, that log is skipped; with any, it runs.
    Jury's cost is its own (llm_client), whatever LiteLLM logs."""
    return not (
        litellm.callbacks
        or litellm.success_callback
        or litellm._async_success_callback
        or getattr(logging_obj, "dynamic_async_success_callbacks", None)
        or getattr(logging_obj, "dynamic_success_callbacks", None)
    )


@functools.lru_cache(maxsize=1024)
def _url_parts(url: str) -> tuple[str, str, int | None]:
    """A request URL's scheme, host and port, as httpx reads them; the api_base passed the
    policy's strict parsing first (jury.schemas.egress_hosts), so aiohttp reads it alike.
    Cached: ~36 µs a parse, at every call."""
    parsed = httpx.URL(url)
    return parsed.scheme, parsed.raw_host.decode("ascii"), parsed.port


@functools.lru_cache(maxsize=1024)
def _pinned_url(url: str, address: str) -> str:
    return str(httpx.URL(url).copy_with(host=address))


class OpenAICompatibleWire(CustomLLM):
    """LiteLLM's custom provider `jury_openai`: one chat completion over aiohttp."""

    async def acompletion(
        self,
        model: str,
        messages: list[Any],
        api_base: str,
        custom_prompt_dict: dict[str, Any],
        model_response: ModelResponse,
        print_verbose: Any,
        encoding: Any,
        api_key: str | None,
        logging_obj: Any,
        optional_params: dict[str, Any],
        acompletion: Any = None,
        litellm_params: Any = None,
        logger_fn: Any = None,
        headers: dict[str, str] | None = None,
        timeout: Any = None,
        client: Any = None,
    ) -> ModelResponse:
        body = {"model": model, "messages": messages}
        body.update((k, v) for k, v in optional_params.items() if k not in _NOT_SENT)
        request_headers = {**(headers or {}), **(optional_params.get("extra_headers") or {})}
        if api_key:
            request_headers["Authorization"] = f"Bearer {api_key}"
        url = f"{api_base.rstrip('/')}/chat/completions"
        # LiteLLM's pre-call log, as its OpenAI provider writes it: callbacks see the request.
        logging_obj.pre_call(
            input=messages,
            api_key=api_key,
            additional_args={
                "api_base": api_base,
                "acompletion": True,
                "complete_input_dict": body,
            },
        )
        session = _session()
        guard = current_guard()
        scheme, host, port = _url_parts(url)
        dest = request_destination(guard, scheme, host, port)
        server_hostname = None
        target = url
        try:
            address = await connect_address(guard, dest)
            if address is not None and dest.address is None:  # pinned: see egress_guard
                request_headers["Host"] = host_header(dest)
                server_hostname = dest.host if dest.scheme == "https" else None
                target = _pinned_url(url, str(address))
            await at_http_send(None)  # the send gate's wait, if the caller left one
            async with session.post(
                target,
                json=body,
                headers=request_headers,
                allow_redirects=False,
                server_hostname=server_hostname,
            ) as reply:
                if reply.status in REDIRECT_STATUSES:
                    location = reply.headers.get("Location", "")
                    raise redirect_refused(guard, dest, reply.status, location)
                content = await _read_bounded(reply)
                status, kept = reply.status, _kept_headers(reply.headers)
        except ReplyTooLarge:
            raise llm_errors.BadGatewayError(
                message=f"the server's reply is larger than {MAX_REPLY_BYTES >> 20} MiB",
                model=model,
                llm_provider="openai",
            ) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise llm_errors.APIConnectionError(
                message=f"{type(exc).__name__}: {exc}", model=model, llm_provider="openai"
            ) from None
        if status >= 400:
            raise _status_error(status, content, kept, model)
        try:
            data = json.loads(content)
        except (ValueError, RecursionError):  # RecursionError: deeper than Python parses
            raise llm_errors.BadGatewayError(
                message=f"the server's reply is not JSON: {_shown(content)}",
                model=model,
                llm_provider="openai",
            ) from None
        response = _reply(data, model_response, model)
        response._hidden_params["additional_headers"] = kept
        if _unobserved(logging_obj):
            # Claimed, never logged: LiteLLM's call wrapper schedules a request's async success
            # log only if no one claimed it first (litellm/utils.py, `_schedule_async_success_
            # logging`: "if not logging_obj.claim_async_success_log(): return").
            logging_obj.claim_async_success_log()
        return response


_WIRE = OpenAICompatibleWire()
