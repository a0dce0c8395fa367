"""bench/pyspy: py-spy's raw profiles folded into steps."""

from __future__ import annotations

from pathlib import Path

from bench.pyspy import step_of, steps


def test_a_stack_belongs_to_its_first_named_step(tmp_path: Path) -> None:
    raw = tmp_path / "jury-2w-worker-0.txt"
    raw.write_text(
        "run (asyncio/events.py:80);judge_task (jury/worker/judging/pipeline.py:148);"
        "GatedCall._pass_send_gate (jury/worker/limits/gating.py:260) 7\n"
        "_WorkItem.run (concurrent/futures/thread.py:58);store_writes (jury/worker/judging/"
        "pipeline.py:330);count_cells (jury/store/samples.py:249) 3\n"
        "select (selectors.py:469) 2\n"
    )
    assert step_of(["x (jury/worker/tasks.py:1)", "y (asyncio/events.py:2)"]) == (
        "task bodies, judging"
    )
    assert steps([raw]) == {"send gate": 7, "store: samples": 3, "other": 2}
