"""The aiohttp application: OpenAI-style chat completions answered by simulated judges."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from jury.simulator.answers import (
    GARBAGE_ANSWERS,
    chat_completion,
    error_body,
    estimate_tokens,
    reasoning_for,
    render_answer,
    render_asked,
)
from jury.simulator.batches import BATCHES_KEY, add_batch_routes, batch_stats, count_api_calls
from jury.simulator.config import SimulatorConfig
from jury.simulator.draws import Draws, request_key
from jury.simulator.faults import plan_faults
from jury.simulator.hostile import (
    HOSTILE_REASONING,
    gzip_bomb_response,
    hostile_body,
    huge_answer,
    send_body,
)
from jury.simulator.limits import SlidingWindowLimiter, rate_headers
from jury.simulator.modes import ModePrompt, answer_mode_prompt, read_mode_prompt
from jury.simulator.personas import PERSONAS, bias_group, find_persona, judge_score
from jury.simulator.prompt_reading import JudgePrompt, PromptError, messages_text, read_prompt
from jury.simulator.stats import GARBAGE, TIMEOUT, AnswerStats
from jury.simulator.writing import written_answer

# Judge prompts carry whole documents; the aiohttp default of 1 MiB is too tight for some.
MAX_REQUEST_BYTES = 32 * 1024 * 1024
# Hung requests should not hold up a shutdown for long.
SHUTDOWN_TIMEOUT_S = 1.0
# Connections waiting to be accepted (the kernel caps it at net.core.somaxconn): thousands of
# calls from workers whose windows open at once (aiohttp's default, 128, dropped their SYNs,
# and each dropped one was retried a second or more later).
LISTEN_BACKLOG = 4096
UNPARSED_MODEL = "(invalid request)"


@dataclass
class SimulatorState:
    config: SimulatorConfig
    limiter: SlidingWindowLimiter = field(init=False)
    stats: AnswerStats = field(default_factory=AnswerStats)
    # Two streams, so that turning faults on does not change the scores' noise draws; each
    # a function of the request and not of the order requests arrive in (simulator.draws).
    score_draws: Draws = field(init=False)
    chaos_draws: Draws = field(init=False)
    # A scripted judge's answers so far, per (model, criterion).
    scripted: dict[tuple[str, str], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.limiter = SlidingWindowLimiter(window_s=self.config.rate_window_s)
        self.score_draws = Draws(self.config.seed, "score")
        self.chaos_draws = Draws(self.config.seed, "chaos")


STATE_KEY = web.AppKey("simulator_state", SimulatorState)


@dataclass(frozen=True)
class CompletionRequest:
    prompt_text: str
    prompt: JudgePrompt | ModePrompt
    temperature: float
    json_required: bool


def parse_completion_request(body: Mapping[str, Any]) -> CompletionRequest:
    """Validate the OpenAI request fields the simulator uses and read the judge prompt."""
    if body.get("stream"):
        raise PromptError("streaming is not supported by the simulator")
    temperature = body.get("temperature")
    if temperature is None:
        temperature = 1.0
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        raise PromptError("'temperature' must be a number")
    if temperature < 0:
        raise PromptError("'temperature' must be >= 0")
    response_format = body.get("response_format")
    json_required = isinstance(response_format, dict) and response_format.get("type") in (
        "json_object",
        "json_schema",
    )
    prompt_text = messages_text(body.get("messages"))
    return CompletionRequest(
        prompt_text,
        read_mode_prompt(prompt_text) or read_prompt(prompt_text),
        float(temperature),
        json_required,
    )


def _answer(
    state: SimulatorState,
    model: str,
    status: int,
    payload: dict[str, Any],
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    state.stats.record_status(model, status)
    return web.json_response(payload, status=status, headers=headers)


def _error(
    state: SimulatorState,
    model: str,
    status: int,
    message: str,
    error_type: str,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    return _answer(state, model, status, error_body(message, error_type, code), headers)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    config = state.config
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        message = "the request body must be a JSON object"
        return _error(state, UNPARSED_MODEL, 400, message, "invalid_request_error")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        message = "'model' is required"
        return _error(state, UNPARSED_MODEL, 400, message, "invalid_request_error")

    persona = find_persona(model)
    if persona is None:
        known = ", ".join(PERSONAS)
        message = (
            f"The model '{model}' does not exist. Personas: {known} (optionally NAME:group@tag)."
        )
        return _error(state, model, 404, message, "invalid_request_error", "model_not_found")
    if config.is_down(model, persona.name):
        message = f"The model '{model}' is unavailable (simulated outage)."
        return _error(state, model, 503, message, "server_error", "service_unavailable")

    limit = config.rpm_for(model, persona.name)
    window_limit = max(1, round(limit * config.rate_window_s / 60)) if limit else 0
    decision = state.limiter.check(model, window_limit)
    if window_limit:
        state.stats.record_arrival(model, decision.allowed, _client_port(request))
    if not decision.allowed:
        message = f"Rate limit of {limit} requests per minute reached for '{model}'."
        refused = {
            "Retry-After": str(decision.retry_after_s),
            **rate_headers(limit, decision, config.rate_window_s),
        }
        return _error(
            state, model, 429, message, "rate_limit_error", "rate_limit_exceeded", refused
        )

    try:
        completion = parse_completion_request(body)
    except PromptError as exc:
        # Not a judge's prompt: the simulator answers it as a model under test would.
        written = written_answer(body.get("messages"), persona.name, config.seed)
        if written is None:
            return _error(state, model, 400, str(exc), "invalid_request_error")
        asked = messages_text(body.get("messages"))
        return _answer(state, model, 200, chat_completion(model, written, asked))

    key = request_key(model, completion.prompt_text, completion.temperature)
    chaos = state.chaos_draws.next(key)
    plan = plan_faults(config, chaos)
    if plan.latency_s > 0:
        await asyncio.sleep(plan.latency_s)
    if plan.hang_s is not None:
        state.stats.record_event(model, TIMEOUT)
        await asyncio.sleep(plan.hang_s)
    if plan.error_status is not None:
        message = "The server had an error while processing your request (simulated)."
        return _error(state, model, plan.error_status, message, "server_error")

    if plan.garbage:
        state.stats.record_event(model, GARBAGE)
        content = chaos.choice(GARBAGE_ANSWERS)
    elif isinstance(completion.prompt, ModePrompt):  # combined or pairwise: always JSON
        content = answer_mode_prompt(
            persona,
            completion.prompt,
            seed=config.seed,
            temperature=completion.temperature,
            rng=state.score_draws.next(key),
            t0_noise=config.t0_noise_for(model, persona.name),
            group=bias_group(model),
            group_error=config.group_error,
            garbled_vote="garbled-vote" in config.hostile_for(model, persona.name),
        )
    else:
        prompt = completion.prompt
        script = config.scripts.get(model)
        if script is not None:  # a scripted judge: its next score on this criterion
            turn = state.scripted.get((model, prompt.criterion), 0)
            state.scripted[(model, prompt.criterion)] = turn + 1
            score = script[turn % len(script)]
        else:
            score = judge_score(
                persona,
                seed=config.seed,
                criterion=prompt.criterion,
                output_text=prompt.output_text,
                data=prompt.data,
                low=prompt.low,
                high=prompt.high,
                temperature=completion.temperature,
                rng=state.score_draws.next(key),
                t0_noise=config.t0_noise_for(model, persona.name),
                group=bias_group(model),
                group_error=config.group_error,
            )
        fmt = "json" if completion.json_required else chaos.choice(config.formats)
        hostile = config.hostile_for(model, persona.name)
        reasoning = reasoning_for(score, prompt.low, prompt.high)
        if "markup-reasoning" in hostile:
            reasoning = HOSTILE_REASONING
        if prompt.vote or prompt.true_false:
            content = render_asked(
                fmt,
                score,
                reasoning,
                low=prompt.low,
                high=prompt.high,
                vote=prompt.vote,
                true_false=prompt.true_false,
                garbled="garbled-vote" in hostile,
            )
        else:
            content = render_answer(fmt, score, reasoning)
        if "huge-answer" in hostile:
            content = huge_answer(score, config.huge_answer_chars)
    if config.ms_per_token > 0:
        # A model writes its answer token by token: longer answers take longer.
        await asyncio.sleep(estimate_tokens(content) * config.ms_per_token / 1000)
    quota = rate_headers(limit, decision, config.rate_window_s) if limit else None
    payload = chat_completion(model, content, completion.prompt_text)
    hostile = config.hostile_for(model, persona.name)
    if not hostile:
        return _answer(state, model, 200, payload, quota)
    state.stats.record_status(model, 200)
    if "gzip-bomb" in hostile:
        return gzip_bomb_response()
    trickle_ms = config.trickle_ms if "trickle" in hostile else None
    return await send_body(request, hostile_body(hostile, payload, chaos), trickle_ms)


async def list_models(request: web.Request) -> web.Response:
    models = [{"id": name, "object": "model", "owned_by": "simulator"} for name in PERSONAS]
    return web.json_response({"object": "list", "data": models})


async def get_stats(request: web.Request) -> web.Response:
    stats = request.app[STATE_KEY].stats.snapshot()
    return web.json_response({**stats, "batch_api": batch_stats(request.app[BATCHES_KEY])})


async def get_arrivals(request: web.Request) -> web.Response:
    """Each request's arrival at a rate-limited model (AnswerStats.record_arrival)."""
    return web.json_response(request.app[STATE_KEY].stats.arrivals())


def _client_port(request: web.Request) -> int:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return int(peer[1]) if isinstance(peer, tuple) and len(peer) > 1 else 0


async def reset_stats(request: web.Request) -> web.Response:
    request.app[STATE_KEY].stats.reset()
    return web.json_response({"ok": True})


async def health(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def count_in_flight(request: web.Request, handler: Handler) -> web.StreamResponse:
    """How many requests are being answered at once, per model: GET /stats shows it."""
    if not request.path.endswith("/chat/completions"):
        return await handler(request)
    try:
        body = await request.json()  # aiohttp keeps the body: the handler reads it again
        model = str(body.get("model")) if isinstance(body, dict) else UNPARSED_MODEL
    except (ValueError, UnicodeDecodeError):
        model = UNPARSED_MODEL
    stats = request.app[STATE_KEY].stats
    stats.enter(model)
    try:
        return await handler(request)
    finally:
        stats.leave(model)


def create_app(config: SimulatorConfig) -> web.Application:
    app = web.Application(
        client_max_size=MAX_REQUEST_BYTES, middlewares=[count_in_flight, count_api_calls]
    )
    app[STATE_KEY] = SimulatorState(config)
    # Any path prefix, as gateways and proxies put one (a deployment, sometimes a token).
    for path in ("/v1/chat/completions", "/chat/completions", "/{prefix:.+}/chat/completions"):
        app.router.add_post(path, chat_completions)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/stats", get_stats)
    app.router.add_get("/stats/arrivals", get_arrivals)
    app.router.add_post("/stats/reset", reset_stats)
    app.router.add_get("/health", health)
    add_batch_routes(app, config)
    return app


def _write_ready_file(path: str, port: int) -> None:
    # Write then rename, so a parent polling for the file never reads it half-written.
    partial = f"{path}.partial"
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(f"{port}\n")
    os.replace(partial, path)


def _loopback(host: str) -> str:
    """Where the simulator reaches itself: a wildcard address is not one to connect to."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _open_files_to_hard_limit() -> None:
    """A connection is a file: raise the soft limit to the hard one (1024, a common soft
    default, is fewer than one worker's calls in flight against a slow judge)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def serve(config: SimulatorConfig, stop: asyncio.Event | None = None) -> None:
    """Serve until `stop` is set or SIGINT/SIGTERM arrives, then shut down cleanly."""
    _open_files_to_hard_limit()
    runner = web.AppRunner(create_app(config), shutdown_timeout=SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    try:
        site = web.TCPSite(runner, config.host, config.port, backlog=LISTEN_BACKLOG)
        await site.start()
        # With port 0 the OS chose; a host with several addresses reports its first one.
        port = int(runner.addresses[0][1])
        runner.app[BATCHES_KEY].self_url = f"http://{_url_host(_loopback(config.host))}:{port}"
        print(f"simulator listening on http://{_url_host(config.host)}:{port}", flush=True)
        if config.ready_file:
            _write_ready_file(config.ready_file, port)
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def run(config: SimulatorConfig) -> None:
    asyncio.run(serve(config))
