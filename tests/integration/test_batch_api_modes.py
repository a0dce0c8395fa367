"""Batch-API judges (docs/batch-api.md) with the result cache and adaptive sampling, end to end:
a simulator of the module's own (its files and batches endpoints over HTTP, a short completion
delay), real Redis, one real `jury worker` with short Batch-API windows, SQLite.

What the simulator saw is counted twice over: the lines of every provider batch it holds (read
from its folder) and the answers of each persona (its /stats, which count a batch line like a
live call, since it answers lines through its own chat completions endpoint)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.common import simulator_stats
from jury.local.services import ManagedProcess
from jury.results.formats import adaptive_figures
from jury.schemas.provider_batches import STORED, custom_id
from jury.schemas.tasks import CellRef
from jury.settings import Settings
from jury.store.cache import count_cached_answers
from jury.store.cells import iter_verdicts
from jury.store.engine import session_factory
from jury.store.provider_batches import provider_batches
from jury.store.repository import batch_status
from jury.store.samples import list_samples
from tests.conftest import launch_workers, settings_for, stop_workers
from tests.integration.test_adaptive import escalation_split
from tests.integration.test_batch_api import (
    FAST,
    _sim_batches,
    batch_simulator,
    sample_keys,
    submitted_lines,
)
from tests.integration.test_pipeline import ITEMS, run_batch, write_batch

pytestmark = pytest.mark.integration
CELLS = len(ITEMS) * 2  # write_batch judges every item on two dimensions
PRICES = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}


@dataclass(frozen=True)
class Stack:
    settings: Settings
    simulator: ManagedProcess
    folder: Path  # the simulator's files and batches

    def answered(self, persona: str) -> int:
        """How many calls (live or batch lines) the simulator answered for a persona."""
        models = simulator_stats(self.simulator)["models"]
        assert isinstance(models, dict)
        return int(models.get(persona, {}).get("200", 0))

    def lines(self) -> int:
        """Request lines of every provider batch the simulator received."""
        return sum(submitted_lines(self.folder).values())

    def bodies(self, batch_id: str) -> list[dict[str, Any]]:
        """The request bodies of a jury batch's lines, as the simulator received them."""
        found = []
        for batch in _sim_batches(self.folder):
            content = (self.folder / "files" / batch["input_file_id"]).read_text()
            lines = [json.loads(line) for line in content.splitlines() if line]
            found += [line["body"] for line in lines if line["custom_id"].startswith(batch_id)]
        return found


@pytest.fixture(scope="module")
def stack(
    redis_url: str, logs_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """One simulator (0.3 s batch completion delay) and one worker for the module's tests."""
    root = tmp_path_factory.mktemp("batch-modes")
    folder = root / "sim-batches"
    simulator = batch_simulator(logs_dir, folder, "--batch-delay", "0.3")
    settings = settings_for(redis_url, f"sqlite:///{root / 'jury.db'}")
    workers = launch_workers(logs_dir, settings, 1, **FAST)
    yield Stack(settings, simulator, folder)
    stop_workers(workers)
    simulator.stop(grace=3)


def _records(settings: Settings, batch_id: str) -> list[dict[str, Any]]:
    return [v.model_dump() for v in iter_verdicts(session_factory(settings.database_url), batch_id)]


def _judged(settings: Settings, batch_id: str, judge: str) -> list[tuple[bool, float]]:
    """(cached, cost) of each of a judge's samples in the batch."""
    sessions = session_factory(settings.database_url)
    return [
        (s.cached, s.cost_usd)
        for item in ITEMS
        for dimension in ("relevance", "tone")
        for s in list_samples(sessions, CellRef(batch_id, str(item["id"]), dimension))
        if s.judge == judge
    ]


def test_a_rerun_takes_batch_judges_answers_from_the_cache(stack: Stack, tmp_path: Path) -> None:
    """A mixed panel with a batch judge, run twice: the second run sends the provider no
    request line (no provider batch at all) and stores the same verdicts from the cache. The
    cache key is the call (model, endpoint, judge name, temperature, max_tokens, messages,
    sample), not the way it travels: a live judge making the very same calls takes the batch
    judge's answers and the other way round, and a judge whose calls differ (another
    temperature) takes neither."""
    settings, sessions = stack.settings, session_factory(stack.settings.database_url)
    persona = f"noisy@c{secrets.token_hex(3)}"
    batched = {"model": f"openai/{persona}", "n": 2, "temperature": 1.0, **PRICES}
    live = {"model": f"openai/balanced@c{secrets.token_hex(3)}", "n": 1}

    def run(judge: dict[str, Any], batch_api: bool) -> str:
        judges = [{**judge, "batch_api": batch_api}, dict(live)]
        return run_batch(settings, write_batch(tmp_path, stack.simulator, judges), timeout=30)

    lines_before = stack.lines()
    first = run(batched, batch_api=True)
    assert stack.lines() - lines_before == CELLS * 2  # every draw of the batch judge, once
    assert stack.answered(persona) == CELLS * 2
    assert count_cached_answers(sessions, f"openai/{persona}") == CELLS * 2
    assert all(b.state == STORED for b in provider_batches(sessions, first))
    judged = _judged(settings, first, f"openai/{persona}")
    assert len(judged) == CELLS * 2 and all(not cached and cost > 0 for cached, cost in judged)

    second = run(batched, batch_api=True)
    assert stack.lines() - lines_before == CELLS * 2  # not one request line more
    assert stack.answered(persona) == CELLS * 2
    assert provider_batches(sessions, second) == []  # no provider batch was even made
    assert _records(settings, second) == _records(settings, first)
    assert _judged(settings, second, f"openai/{persona}") == [(True, 0.0)] * CELLS * 2
    assert batch_status(sessions, second).cost_usd == 0

    # The same judge live: the very same calls, answered by the batch judge's cache entries.
    third = run(batched, batch_api=False)
    assert stack.answered(persona) == CELLS * 2
    assert _records(settings, third) == _records(settings, first)

    # Another temperature is another call: live, it is made; then a batch judge takes it.
    warmer = {**batched, "temperature": 0.7}
    fourth = run(warmer, batch_api=False)
    assert stack.answered(persona) == CELLS * 4
    assert stack.lines() - lines_before == CELLS * 2
    made = _judged(settings, fourth, f"openai/{persona}")
    assert len(made) == CELLS * 2 and not any(cached for cached, _ in made)
    fifth = run(warmer, batch_api=True)
    assert stack.answered(persona) == CELLS * 4 and stack.lines() - lines_before == CELLS * 2
    assert provider_batches(sessions, fifth) == []
    assert _records(settings, fifth) == _records(settings, fourth)


def test_adaptive_batch_escalates_through_provider_batches(stack: Stack, tmp_path: Path) -> None:
    """An adaptive batch with a live judge, a batch judge and a reserve batch judge: the first
    round's batch samples go through a provider batch; the uncertain cells' extra samples of
    the batch judges through later provider batches, each request once; every cell gets one
    verdict; the calls the simulator answered are the samples stored, and the calls saved are
    reported as for live judges."""
    settings, sessions = stack.settings, session_factory(stack.settings.database_url)
    tag = secrets.token_hex(3)
    judges = [
        {"model": f"openai/balanced@a{tag}", "n": 3},
        {"model": f"openai/contrarian@a{tag}", "n": 3, "batch_api": True},
        {"model": f"openai/strict@a{tag}", "n": 2, "reserve": True, "batch_api": True},
    ]
    batch = write_batch(
        tmp_path,
        stack.simulator,
        judges,
        adaptive={"initial_samples": 1, "max_std": 0.5},
        cache=False,
    )
    sent_before = set(submitted_lines(stack.folder))
    batch_id = run_batch(settings, batch, timeout=30)
    status = batch_status(sessions, batch_id)

    escalated_records, kept = escalation_split(sessions, batch_id)
    escalated, certain = len(escalated_records), len(kept)
    assert 0 < escalated == status.n_escalated < status.n_cells
    assert escalated + certain == status.n_cells == status.n_verdicts == CELLS
    cells = [(r["item_id"], r["criterion_id"]) for r in _records(settings, batch_id)]
    assert len(cells) == len(set(cells)) == CELLS  # one verdict per cell

    # Every batch judge's sample went through a provider batch, its request sent once.
    keys = sample_keys(settings, batch_id)
    assert set(keys.values()) == {1} and len(keys) == certain * 2 + escalated * 8
    sent = submitted_lines(stack.folder)
    mine = {cid: n for cid, n in sent.items() if cid not in sent_before}
    expected = {
        custom_id(batch_id, item, dimension, judge, sample, 0)
        for item, dimension, judge, sample in keys
        if "balanced" not in judge
    }
    assert set(mine) == expected and set(mine.values()) == {1}
    assert len(expected) == certain + escalated * 5
    made = provider_batches(sessions, batch_id)
    assert all(b.state == STORED for b in made)
    assert sum(b.requests for b in made) == len(expected)
    # The contrarian's first round, then the escalated samples in provider batches of their
    # own (the escalation starts once the first round is stored); the reserve only then.
    contrarian = [b for b in made if "contrarian" in b.judge]
    assert len(contrarian) >= 2
    assert sum(b.requests for b in made if "strict" in b.judge) == escalated * 2

    # Calls made (live calls and batch lines alike) are the samples stored.
    calls = sum(stack.answered(f"{p}@a{tag}") for p in ("balanced", "contrarian", "strict"))
    assert stack.answered(f"balanced@a{tag}") == certain + escalated * 3
    assert calls == status.n_samples == certain * 2 + escalated * 8
    assert adaptive_figures(status) == {
        "cap": CELLS * 8,
        "calls": calls,
        "saved": CELLS * 8 - calls,
        "escalated_cells": escalated,
        "cells": CELLS,
    }


def test_combined_batch_judge_lines_are_the_live_calls_and_rerun_from_the_cache(
    stack: Stack, tmp_path: Path
) -> None:
    """`mode: combined` with a batch judge: each line asks what the live call would (room for
    both dimensions' answers, JSON mode), and a re-run takes every answer from the cache."""
    settings = stack.settings
    persona = f"noisy@m{secrets.token_hex(3)}"
    judges = [{"model": f"openai/{persona}", "n": 2, "batch_api": True, "max_tokens": 300}]
    batch = write_batch(tmp_path, stack.simulator, judges, mode="combined")
    first = run_batch(settings, batch, timeout=30)
    bodies = stack.bodies(first)
    assert len(bodies) == len(ITEMS) * 2  # one call per (item, sample) scores both dimensions
    assert {b["max_tokens"] for b in bodies} == {600}
    assert all(b["response_format"] == {"type": "json_object"} for b in bodies)
    lines = stack.lines()
    second = run_batch(settings, batch, timeout=30)
    assert stack.lines() == lines and stack.answered(persona) == len(ITEMS) * 2
    assert _records(settings, second) == _records(settings, first)
    assert _judged(settings, second, f"openai/{persona}") == [(True, 0.0)] * CELLS * 2
