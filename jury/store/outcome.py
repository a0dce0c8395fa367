"""A finished batch's end state (completed, degraded or failed), settled in the transaction
that stores its last verdict, and the per-judge failures that explain it."""

from __future__ import annotations

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from jury.schemas.batch import BatchConfig
from jury.schemas.outcome import JudgeFailures, JudgeTally, batch_outcome
from jury.schemas.status import BatchState
from jury.store.models import BatchRow, SampleRow, VerdictRow
from jury.store.sql import Sessions


def judge_tallies(session: Session, batch_id: str) -> dict[str, JudgeTally]:
    rows = session.execute(
        select(
            SampleRow.judge,
            func.count(),
            func.coalesce(func.sum(case((SampleRow.score.is_(None), 1), else_=0)), 0),
        )
        .where(SampleRow.batch_id == batch_id)
        .group_by(SampleRow.judge)
    )
    return {judge: JudgeTally(judged=n, failed=int(failed)) for judge, n, failed in rows}


def count_unscored(session: Session, batch_id: str) -> int:
    found = session.scalar(
        select(func.count())
        .select_from(VerdictRow)
        .where(VerdictRow.batch_id == batch_id, VerdictRow.final_score.is_(None))
    )
    return int(found or 0)


def settle_outcome(session: Session, batch_id: str) -> None:
    """Turn a batch just marked `completed` into its real end state, from its counts (in the
    caller's transaction, which holds the batch row)."""
    row = session.get(BatchRow, batch_id)
    if row is None or row.status != BatchState.COMPLETED.value:
        return
    state = batch_outcome(
        row.n_verdicts, count_unscored(session, batch_id), judge_tallies(session, batch_id)
    )
    row.status = state.value
    if state == BatchState.FAILED:
        row.error = "no verdict has a score: every judge failed on every cell"


def judge_failures(sessions: Sessions, batch_id: str, config: BatchConfig) -> list[JudgeFailures]:
    """Each judge with failed judgments: counts by error kind and one message, in panel order."""
    with sessions() as session:
        tallies = judge_tallies(session, batch_id)
        kinds = session.execute(
            select(SampleRow.judge, SampleRow.error_kind, func.count(), func.min(SampleRow.error))
            .where(SampleRow.batch_id == batch_id, SampleRow.score.is_(None))
            .group_by(SampleRow.judge, SampleRow.error_kind)
        )
        found: dict[str, JudgeFailures] = {}
        messages: dict[tuple[str, str], str] = {}
        for judge, kind, count, message in kinds:
            tally = tallies.get(judge, JudgeTally(judged=count, failed=count))
            entry = found.setdefault(
                judge,
                JudgeFailures(
                    judge=judge,
                    model=_model(config, judge),
                    judged=tally.judged,
                    failed=tally.failed,
                    kinds={},
                    sample_message="",
                ),
            )
            entry.kinds[kind or "error"] = int(count)
            messages[(judge, kind or "error")] = message or ""
    for entry in found.values():  # the message of its most frequent kind
        entry.sample_message = messages[(entry.judge, entry.main_kind)]
    order = [j.name for j in config.judges]
    return sorted(found.values(), key=lambda f: order.index(f.judge) if f.judge in order else 99)


def _model(config: BatchConfig, judge: str) -> str:
    try:
        return config.judge(judge).model
    except KeyError:
        return judge
