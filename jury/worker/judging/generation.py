"""A generation task: one candidate answers one item's input, then the item is judged.

The task runs, for (item, candidate):

1. the batch's state and budget (a cancelled batch, or one out of budget, skips it: `jury
   resume` queues it again) and the stored answer: an answer stored by an earlier delivery
   is not asked for again;
2. the candidate's answer: an LLM through the same rate limiter and call as a judge
   (jury.worker.limits.gating, llm_client; free text, not JSON mode), with jury's retry policy for
   transient errors, or an HTTP endpoint (jury.worker.calls.endpoint_client). A failure is stored
   as the answer text, marked with its kind, and judged: the LLM judge evaluator's behaviour;
3. one store write (jury.store.generations): the answer under its unique key, and when it is
   the item's last, the outputs of the items judged on its answers (the item itself, or with
   more than two candidates its pair items) and the claim on their judging;
4. for the claimer only: their judge tasks, queued as submission would have queued them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import ClassVar

from jury.errors import JudgeCallError, UnknownBatchError
from jury.schemas.adaptive import first_round
from jury.schemas.batch import BatchConfig, Item, Judge
from jury.schemas.calls import task_refs
from jury.schemas.candidates import HTTPCandidate, LLMCandidate, error_answer
from jury.schemas.item_dimensions import item_dimension_names
from jury.schemas.task_messages import refused
from jury.schemas.tasks import GenerationRef, SampleRef
from jury.store.generations import (
    Generation,
    is_generated,
    item_input,
    record_generation,
    release_claim,
)
from jury.worker.calls.endpoint_client import ask_endpoint
from jury.worker.judging.judge_calls import CallTally, ReplyLike, ask
from jury.worker.judging.message_checks import check_generation
from jury.worker.limits.budget import BudgetRefused
from jury.worker.limits.gating import Deferred, endpoint_rate_key, holding_slot
from jury.worker.limits.ratelimit import Limits
from jury.worker.runtime import WorkerRuntime

log = logging.getLogger("jury.worker")


class AnsweringModel(Judge):
    """An LLM candidate called as a judge is, but asked for free text rather than JSON."""

    json_answer: ClassVar[bool] = False


def answering_model(candidate: LLMCandidate) -> AnsweringModel:
    return AnsweringModel(
        model=candidate.model,
        name=candidate.name,
        n=1,
        temperature=candidate.temperature,
        api_base=candidate.api_base,
        api_key_env=candidate.api_key_env,
        timeout_s=candidate.timeout_s,
        max_tokens=max(16, candidate.max_tokens),
        rpm=candidate.rpm,
        tpm=candidate.tpm,
        max_in_flight=candidate.max_in_flight,
    )


def candidate_messages(candidate: LLMCandidate, text: str) -> list[dict[str, str]]:
    """The item's input as the user message, after the candidate's system prompt if any."""
    system = [{"role": "system", "content": candidate.system}] if candidate.system else []
    return [*system, {"role": "user", "content": text}]


def item_judge_refs(batch_id: str, config: BatchConfig, item: Item) -> Iterator[SampleRef]:
    """The item's judge tasks (its first round, for an adaptive batch)."""
    samples = first_round(config)
    refs = (
        SampleRef(batch_id, item.id, dimension, judge, index)
        for dimension in item_dimension_names(config, item)
        for judge, index in samples
    )
    return task_refs(config, refs)


async def generate_task(runtime: WorkerRuntime, ref: GenerationRef) -> str:
    """Generate (unless stored already), store, and queue the judging the answer completes;
    returns what happened, for the task's result."""
    # The store's reads run off the loop, as a judge task's preparation does.
    config, candidate = await runtime.in_store(check_generation, runtime, ref)
    state = await runtime.in_store(runtime.state, ref.batch_id)
    if state.skips_work:
        return f"skipped: batch {state.value}"
    out_of_budget = await runtime.in_store(runtime.out_of_budget, ref.batch_id, config)
    if out_of_budget:  # `jury resume --max-cost-usd` queues the generation again
        return f"skipped: {out_of_budget}"
    names = [c.name for c in config.candidates]
    generation: Generation | None = None
    stored = await runtime.in_store(is_generated, runtime.sessions, *ref)
    if not stored:
        try:
            text = await runtime.in_store(
                item_input, runtime.sessions, ref.batch_id, ref.item_id, names
            )
        except UnknownBatchError as exc:  # no input item of that id: nothing to answer
            raise refused("generation task", str(exc), tuple(ref)) from None
        try:
            generation = await answer(runtime, candidate, text or "", ref.batch_id, config)
        except BudgetRefused as exc:  # `jury resume --max-cost-usd` queues it again
            reason = await runtime.in_store(runtime.stop_for_budget, ref.batch_id, exc.reading)
            return f"skipped: {reason}"
    items = await runtime.in_store(
        record_generation, runtime.sessions, ref.batch_id, ref.item_id, generation, names
    )
    done = "stored earlier" if stored else (generation.error_kind if generation else None)
    outcome = f"generated ({done})" if done else "generated"
    if not items:
        return outcome
    refs = [r for item in items for r in item_judge_refs(ref.batch_id, config, item)]
    try:
        await runtime.in_store(runtime.queue_tasks, config, refs)
    except Exception:
        await runtime.in_store(release_claim, runtime.sessions, ref.batch_id, ref.item_id)
        raise
    return f"{outcome}; judging queued"


async def answer(
    runtime: WorkerRuntime,
    candidate: LLMCandidate | HTTPCandidate,
    text: str,
    batch_id: str,
    config: BatchConfig,
) -> Generation:
    """The candidate's answer to `text`, or its failure as the answer text."""
    if isinstance(candidate, HTTPCandidate):
        # Waited for in the loop, as an LLM candidate's slot: a generation is never parked.
        limits = Limits(rpm=candidate.rpm, max_in_flight=candidate.max_in_flight)
        async with holding_slot(runtime.limiter, endpoint_rate_key(candidate.url), limits):
            return await ask_endpoint(candidate, text, runtime.egress)
    model = answering_model(candidate)

    async def call_when_allowed(judge: Judge, messages: list[dict[str, str]]) -> ReplyLike:
        # Waiting for a rate-limit slot in the loop (a generation is never parked), and not
        # counted as an attempt.
        while True:
            gated = runtime.gated_call(batch_id, config)
            try:
                return await gated(judge, messages)
            except Deferred as exc:
                await asyncio.sleep(max(exc.countdown_s, 0.2))

    tally = CallTally()
    messages = candidate_messages(candidate, text)
    try:
        # jury's retry policy, as for a judge's call (jury.worker.judging.judge_calls.ask): any
        # text will do.
        answer_text = await ask(model, messages, str, call_when_allowed, runtime.policy, tally)
    except JudgeCallError as exc:
        return Generation(candidate.name, error_answer(exc.kind, str(exc)), exc.kind)
    except BudgetRefused:
        raise
    except Exception as exc:
        log.exception("generation by %s failed outside the call", candidate.name)
        detail = f"{type(exc).__name__}: {exc}"
        return Generation(candidate.name, error_answer("internal", detail), "internal")
    return Generation(
        candidate.name,
        answer_text,
        None,
        tally.latency_ms,
        tally.prompt_tokens,
        tally.completion_tokens,
        tally.cost_usd,
    )
