"""The one place that knows LiteLLM: one chat completion, its cost, and its errors mapped onto
ours. LiteLLM's and the OpenAI SDK's own retries are off: the retry policy is jury's alone.

Importing this module imports litellm (~2 s, ~160 MiB), so only worker processes do, once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch prices at import

import litellm

from jury.errors import EgressRefused, TransientJudgeError
from jury.schemas.batch import Judge
from jury.schemas.egress import EgressPolicy, ModelCall, plan_model_call
from jury.schemas.placeholders import call_settings, redact, taken_variables
from jury.worker.calls.egress_guard import CallGuard, call_key, environment_policy, guarding
from jury.worker.calls.lazy_encoding import defer_default_encoding
from jury.worker.calls.litellm_http import install_send_hook
from jury.worker.calls.llm_errors import (
    classify_error,
    header_duration,
    header_int,
    withheld_hint,
)
from jury.worker.calls.openai_wire import REPORTED_USAGE, register_wire, wire_model, wire_price
from jury.worker.calls.send_wait import pending_wait, waiting_at_send
from jury.worker.calls.usage import checked_cost, checked_usage

litellm.suppress_debug_info = True
litellm.telemetry = False
# LiteLLM logs every call at INFO; a worker doing thousands a minute keeps only its warnings.
for _name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx"):
    logging.getLogger(_name).setLevel(logging.WARNING)


@dataclass(frozen=True)
class LLMReply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_ms: float
    # The provider's request quota and what is left of it, from its rate-limit headers.
    limit_requests: int | None = None
    remaining_requests: int | None = None
    # Until the provider's request window frees a slot (x-ratelimit-reset-requests).
    reset_requests_s: float | None = None


@functools.lru_cache(maxsize=256)
def supports_json_mode(model: str) -> bool:
    try:
        params = litellm.get_supported_openai_params(model=model) or []
    except Exception:
        return False
    return "response_format" in params


def sampling_params(judge: Judge) -> dict[str, Any]:
    """What a call asks of the model besides its messages. A live call and a provider batch's
    line send the same, so that both are the same call: the result cache serves either's
    answer to the other (jury.worker.judging.result_cache)."""
    params: dict[str, Any] = {"temperature": judge.temperature, "max_tokens": judge.max_tokens}
    # A candidate generating an output (worker.generation) is asked for free text; its class
    # says so (a missing attribute costs pydantic ~25 µs to report, at every call).
    if getattr(type(judge), "json_answer", True) and supports_json_mode(judge.model):
        params["response_format"] = {"type": "json_object"}
    return params


# Every rate LiteLLM may price a chat call with: an unpriced model registered at zero on all of
# them is free in LiteLLM's eyes too, and its zero-cost check stays quiet.
_ZERO_RATES = (
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_read_input_token_cost",
    "cache_creation_input_token_cost",
)


@functools.lru_cache(maxsize=256)
def price_unpriced_model(model: str) -> bool:
    """Register `model` in LiteLLM's price map at zero if the map has no price for it (a local
    server, the simulator); returns whether it did. Such a call costs nothing known either way
    (LiteLLM answers no cost, jury stores 0), but LiteLLM searches its whole map for a match,
    twice per call, when pricing an unmapped model: ~0.8 ms of CPU per call, against ~0.2 ms
    for a mapped one. A model LiteLLM does price is left untouched. Once per model and process.
    """
    try:
        litellm.get_model_info(model)
        return False
    except Exception:
        pass
    try:
        provider = litellm.get_llm_provider(model)[1]
        entry: dict[str, Any] = dict.fromkeys(_ZERO_RATES, 0.0)
        litellm.register_model({model: {**entry, "litellm_provider": provider, "mode": "chat"}})
    except Exception:
        return False  # LiteLLM merely keeps searching, as before
    return True


def caller(judge: Judge) -> str:
    """What the call is for, in messages: a judge, or a candidate generating an answer (its
    class says so: a missing attribute costs pydantic ~25 µs to report)."""
    return f"{'judge' if getattr(type(judge), 'json_answer', True) else 'candidate'} {judge.name}"


def model_call(judge: Judge, placeholders: tuple[str, ...], egress: EgressPolicy) -> ModelCall:
    """What the (expanded) judge's call may carry, and where (EgressRefused otherwise):
    `placeholders`, the variables its model and api_base took from the environment."""
    return _planned(
        egress,
        caller(judge),
        _provider(judge.model),
        judge.api_base,
        judge.api_key_env,
        placeholders,
    )


# One plan per kind of call, not per call: a worker makes hundreds a second.
_planned = functools.lru_cache(maxsize=1024)(plan_model_call)


def _sent_without_the_hook(judge: Judge) -> None:
    """The call was answered but its request never met the hook: this model's calls leave
    through another client. Its later calls pass the gate before the call instead."""
    if judge.model not in _UNHOOKED:
        _UNHOOKED.add(judge.model)
        logging.getLogger(__name__).warning(
            "calls to %s do not pass jury's HTTP request hook: its send gate runs before "
            "LiteLLM instead",
            judge.model,
        )


def _cost(
    judge: Judge, prompt_tokens: int, completion_tokens: int, response: Any, wired: bool = False
) -> float:
    """The judge's own prices when the batch gives them, else LiteLLM's price map."""
    if judge.input_cost_per_token is not None or judge.output_cost_per_token is not None:
        return prompt_tokens * (judge.input_cost_per_token or 0.0) + completion_tokens * (
            judge.output_cost_per_token or 0.0
        )
    if wired:  # by the judge's model, with the tokens as checked (estimated, if none came)
        return (
            wire_price(judge.model.removeprefix("openai/"), prompt_tokens, completion_tokens) or 0.0
        )
    # LiteLLM has priced the call already, while logging it: computing it again costs a
    # worker about a millisecond per call.
    hidden = getattr(response, "_hidden_params", None) or {}
    if "response_cost" in hidden:  # None: a model missing from the price map
        return float(hidden["response_cost"] or 0.0)
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:
        return 0.0  # a model missing from the price map (e.g. the simulator) costs nothing known


def uses_wire(judge: Judge) -> bool:
    """Whether the judge's calls go through jury's own wire (jury.worker.calls.openai_wire): an
    OpenAI-compatible server named by its api_base, unless the judge asks for LiteLLM's."""
    wanted = getattr(judge, "http_client", "jury") == "jury"  # a generating candidate: jury's
    return bool(judge.api_base) and wanted and _openai_provider(judge.model)


# Models whose calls were seen leaving without the request hook (another HTTP client than the
# shared session): their send gate is passed before the call instead (waits_at_send).
_UNHOOKED: set[str] = set()


def warm_up() -> None:
    """Do at a worker's start what its first call would otherwise do on the way: the OpenAI
    SDK imports its ~470 resource modules at its first request (0.35 s of CPU on the
    development machine, twice that on a busy host, and the batch's first judgments waited
    for it), the hooked HTTP session; LiteLLM's tokenizer is left for its first use."""
    import openai.resources  # noqa: F401

    install_send_hook()
    # Every call's path would load LiteLLM's default tokenizer (tiktoken's cl100k_base: 40 MB
    # and 0.13 s of CPU), which jury's wire never uses: loaded at its first use instead.
    defer_default_encoding()
    # LiteLLM's own lazy imports on a call's path (its response and logging types), through
    # a mocked answer: nothing is sent.
    with contextlib.suppress(Exception):
        litellm.completion(
            model="openai/warm-up", messages=[{"role": "user", "content": "-"}], mock_response="-"
        )


def waits_at_send(judge: Judge) -> bool:
    """Whether complete() runs the send gate at the HTTP send for this judge: LiteLLM's
    OpenAI provider (OpenAI, and every server behind `openai/` with an api_base) sends through
    the hooked session; other providers use LiteLLM's own HTTP handlers."""
    return uses_wire(judge) or (judge.model not in _UNHOOKED and _openai_provider(judge.model))


@functools.lru_cache(maxsize=256)
def _provider(model: str) -> str:
    """The LiteLLM provider of `model` ("" when LiteLLM cannot tell)."""
    try:
        return str(litellm.get_llm_provider(model)[1])
    except Exception:
        return ""


def _openai_provider(model: str) -> bool:
    return _provider(model) == "openai"


async def complete(
    judge: Judge, messages: list[dict[str, str]], egress: EgressPolicy | None = None
) -> LLMReply:
    """One chat completion for one judge; raises TransientJudgeError/PermanentJudgeError
    (EgressRefused, when the workers' egress policy refuses it: nothing is sent).

    Runs on the worker process's one long-lived event loop (jury.worker.engine.loop): LiteLLM keeps
    its HTTP sessions per loop, so a loop per call would rebuild them every time. `egress`:
    the worker's policy (its runtime passes it), else this process's environment's."""
    env = os.environ
    placeholders = (*taken_variables(judge.model, env), *taken_variables(judge.api_base, env))
    judge, secrets = call_settings(judge, env)  # ${VAR} expanded here, and only here
    policy = egress or environment_policy()
    try:
        call = model_call(judge, placeholders, policy)
    except EgressRefused as exc:  # an api_base's host may be a placeholder's value
        raise EgressRefused(redact(str(exc), secrets)) from None
    what = caller(judge)
    api_key = call_key(call, judge.api_key_env, what)
    kwargs: dict[str, Any] = {
        "model": judge.model,
        "messages": messages,
        **sampling_params(judge),
        "timeout": judge.timeout_s,
        "num_retries": 0,
        "max_retries": 0,
    }
    price_unpriced_model(judge.model)
    wired = uses_wire(judge)
    if wired:
        register_wire()
        kwargs["model"] = wire_model(judge.model)
        price_unpriced_model(kwargs["model"])  # LiteLLM's logging looks it up in its price map
    if judge.api_base:
        kwargs["api_base"] = judge.api_base
    if api_key:
        kwargs["api_key"] = api_key
    install_send_hook()
    gate = pending_wait()
    started = time.perf_counter()
    try:
        # One deadline for the whole call, connecting and receiving included: LiteLLM's own
        # timeout bounds each read, so a server trickling its answer would never time out.
        # asyncio.timeout, not wait_for: the same deadline without a second task per call.
        async with asyncio.timeout(judge.timeout_s) as deadline:
            guarded = guarding(CallGuard(policy, call.carried, what))
            if gate is None:
                with guarded:
                    response = await litellm.acompletion(**kwargs)
            else:

                async def gate_then_send() -> None:
                    # Waiting at the gate is not the call's time: timeout_s starts at the send.
                    nonlocal started
                    deadline.reschedule(None)
                    await gate()
                    deadline.reschedule(asyncio.get_running_loop().time() + judge.timeout_s)
                    started = time.perf_counter()

                with guarded, waiting_at_send(gate_then_send):
                    response = await litellm.acompletion(**kwargs)
                    if pending_wait() is not None:
                        _sent_without_the_hook(judge)
    except TimeoutError:
        raise TransientJudgeError(
            f"no complete answer within timeout_s={judge.timeout_s:g} s", kind="timeout"
        ) from None
    except Exception as exc:
        raise withheld_hint(classify_error(exc, api_key, secrets), call) from None
    latency_ms = (time.perf_counter() - started) * 1000
    choice = response.choices[0] if response.choices else None
    text = getattr(getattr(choice, "message", None), "content", None) or ""
    hidden = getattr(response, "_hidden_params", None) or {}
    # The wire keeps the usage as the server reported it, for checked_usage to judge.
    usage = hidden.get(REPORTED_USAGE, getattr(response, "usage", None))
    prompt_tokens, completion_tokens = checked_usage(usage, messages, text)
    headers = hidden.get("additional_headers")
    return LLMReply(
        text=text,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=checked_cost(_cost(judge, prompt_tokens, completion_tokens, response, wired)),
        latency_ms=latency_ms,
        limit_requests=header_int(headers, "x-ratelimit-limit-requests"),
        remaining_requests=header_int(headers, "x-ratelimit-remaining-requests"),
        reset_requests_s=header_duration(headers, "x-ratelimit-reset-requests"),
    )


def model_prices(model: str) -> tuple[float, float] | None:
    """(input, output) USD per token in LiteLLM's price map, or None where it has none: what
    the budget's estimate of a call is priced at (jury.worker.limits.budget)."""
    for key in (model, model.split("/", 1)[-1]):
        entry = litellm.model_cost.get(key)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            return float(entry["input_cost_per_token"] or 0.0), float(
                entry.get("output_cost_per_token") or 0.0
            )
    return None
