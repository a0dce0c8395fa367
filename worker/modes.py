"""Judge tasks of the combined and pairwise modes, run on a WorkerRuntime.

The same exactly-once rules as WorkerRuntime.judge: the task's samples (one per dimension for
a combined task; one with its four pair scores for a pairwise task) are stored in one
transaction under the cells' unique keys, then every cell they complete is finalized. A
duplicate delivery stores nothing new; a killed worker's task runs again and stores what
the first run did not. Samples the store refused travel in the retried task's arguments, so
a database hiccup never pays for the calls twice.
"""

from __future__ import annotations

import logging
from typing import Any

from schemas.batch import BatchConfig
from schemas.pairwise import PairJudgment
from schemas.results import SampleResult
from schemas.tasks import ALL_DIMENSIONS, CellRef, SampleRef
from store.mode_samples import record_samples
from worker.gating import Deferred, GatedCall
from worker.judging import internal_error
from worker.mode_judging import JudgedSample, judge_all_dimensions, judge_pair_sample
from worker.runtime import SKIPPED, SampleNotStored, WorkerRuntime

log = logging.getLogger("jury.worker")


def uses_modes(runtime: WorkerRuntime, ref: SampleRef) -> bool:
    """Whether this task is one of a combined or pairwise batch (else WorkerRuntime.judge)."""
    return ref.dimension == ALL_DIMENSIONS or runtime.config(ref.batch_id).pairwise is not None


class SamplesNotStored(SampleNotStored):
    """The store refused a task's samples: the task retries storing them, without calling."""

    def __init__(self, judged: list[JudgedSample], cause: Exception) -> None:
        super().__init__(judged[0].result, cause)
        self.judged = judged

    @property
    def payload(self) -> dict[str, Any]:
        return {"samples": [encode(j) for j in self.judged]}


def encode(judged: JudgedSample) -> dict[str, Any]:
    return {
        "dimension": judged.dimension,
        "result": judged.result.model_dump(mode="json"),
        "pair": list(judged.pair) if judged.pair is not None else None,
    }


def decode(payload: dict[str, Any]) -> list[JudgedSample]:
    return [
        JudgedSample(
            entry["dimension"],
            SampleResult.model_validate(entry["result"]),
            PairJudgment(*entry["pair"]) if entry.get("pair") else None,
        )
        for entry in payload["samples"]
    ]


def _internal_error(ref: SampleRef, dimensions: list[str], exc: Exception) -> list[JudgedSample]:
    error = internal_error(ref.judge, ref.sample, exc)
    return [JudgedSample(d, error) for d in dimensions]


def _dimension_names(config: BatchConfig, ref: SampleRef) -> list[str]:
    if ref.dimension == ALL_DIMENSIONS:
        return [d.name for d in config.dimensions]
    return [ref.dimension]


def _call(runtime: WorkerRuntime, ref: SampleRef) -> list[JudgedSample] | None:
    """The task's judged samples; None when it was not judged (cancelled, out of budget)."""
    config = runtime.config(ref.batch_id)
    names = _dimension_names(config, ref)
    try:
        if runtime._out_of_budget(ref.batch_id, config):
            return None
        judge = config.judge(ref.judge)
        item = runtime.item(ref.batch_id, ref.item_id)
        gated = GatedCall(runtime.call, runtime.limiter, runtime.settings.rate_horizon_s)
        if ref.dimension == ALL_DIMENSIONS:
            return judge_all_dimensions(
                judge, config.dimensions, item, ref.sample, gated, runtime.policy
            )
        dimension = config.dimension(ref.dimension)
        if not item.is_pair:
            raise ValueError(f"item {ref.item_id!r} of a pairwise batch lacks output_a/output_b")
        return [judge_pair_sample(judge, dimension, item, ref.sample, gated, runtime.policy)]
    except Deferred:
        raise  # the task retries later; nothing was called, nothing is stored
    except Exception as exc:
        log.exception("judge task %s failed before or outside the judge call", ref)
        return _internal_error(ref, names, exc)


def judge_in_mode(
    runtime: WorkerRuntime, ref: SampleRef, judged: dict[str, Any] | None = None
) -> list[JudgedSample]:
    """Judge (or, with `judged`, only store) one combined or pairwise task; finalize the
    cells it completes. Returns what it stored (nothing if the batch skips work)."""
    if runtime.state(ref.batch_id).skips_work:
        return []
    samples = decode(judged) if judged else _call(runtime, ref)
    if samples is None:
        return []
    if judged is None:
        cost = sum(s.result.cost_usd for s in samples)
        try:
            runtime.budget.spend(ref.batch_id, cost)
        except Exception:
            log.exception("could not update the budget meter of %s", ref.batch_id)
    rows = [
        (CellRef(ref.batch_id, ref.item_id, s.dimension), s.result, s.pair)
        for s in samples
        if s.result.error_kind != SKIPPED
    ]
    try:
        record_samples(runtime.sessions, rows)
    except Exception as exc:
        raise SamplesNotStored(samples, exc) from exc
    for cell, _, _ in rows:
        runtime.finalize_if_complete(cell)
    return samples
