"""How a batch ends (completed, degraded, failed) from its counts, and what the user is told
about each failing judge."""

from __future__ import annotations

from jury.batchfile.planning import budget_problems, plan_batch
from jury.schemas.batch import BatchConfig
from jury.schemas.outcome import (
    JudgeFailures,
    JudgeTally,
    batch_outcome,
    failure_paragraph,
)
from jury.schemas.status import BatchState
from jury.settings import store_id


def test_every_verdict_without_a_score_is_failed() -> None:
    judges = {"a": JudgeTally(judged=30, failed=30)}
    assert batch_outcome(10, 10, judges) == BatchState.FAILED


def test_a_failing_judge_or_an_unscored_verdict_is_degraded() -> None:
    healthy = JudgeTally(judged=100, failed=0)
    assert batch_outcome(10, 0, {"a": healthy, "b": JudgeTally(judged=100, failed=100)}) == (
        BatchState.DEGRADED
    )
    assert batch_outcome(10, 1, {"a": healthy}) == BatchState.DEGRADED
    assert batch_outcome(10, 0, {"a": healthy, "b": JudgeTally(judged=100, failed=5)}) == (
        BatchState.DEGRADED  # 5 % of a judge's judgments
    )


def test_a_few_failed_judgments_still_complete() -> None:
    judges = {"a": JudgeTally(judged=100, failed=4), "b": JudgeTally(judged=100, failed=0)}
    assert batch_outcome(10, 0, judges) == BatchState.COMPLETED
    assert batch_outcome(0, 0, {}) == BatchState.COMPLETED


def test_a_failing_judge_gets_one_paragraph_with_what_to_check() -> None:
    failures = JudgeFailures(
        judge="gpt",
        model="openai/gpt-4o-mini",
        judged=12,
        failed=12,
        kinds={"auth": 10, "timeout": 2},
        sample_message="AuthenticationError: Incorrect API key\nprovided",
    )
    text = failure_paragraph(failures, "b-1")
    assert text.startswith("judge gpt (openai/gpt-4o-mini) failed 12 of 12 judgments (100%)")
    assert "auth 10, timeout 2" in text
    assert "'AuthenticationError: Incorrect API key provided'" in text  # one line
    assert "What to check: check the provider key" in text
    unknown = failures.model_copy(update={"kinds": {"weird": 1}})
    assert "`jury resume b-1`" in failure_paragraph(unknown, "b-1")


def _config(**extra: object) -> BatchConfig:
    return BatchConfig.model_validate(
        {"judges": ["openai/gpt-4o-mini", "openai/my-local-model"], "dimensions": ["relevance"]}
        | extra
    )


def test_a_budget_needs_every_judge_priced() -> None:
    assert budget_problems(_config()) == []
    (problem,) = budget_problems(_config(max_cost_usd=5))
    assert problem.startswith("judges[1]: max_cost_usd is set, but the price of")
    assert "input_cost_per_token" in problem
    priced = _config(
        max_cost_usd=5,
        judges=[
            "openai/gpt-4o-mini",
            {"model": "openai/my-local-model", "input_cost_per_token": 0},
        ],
    )
    assert budget_problems(priced) == []


def test_the_plan_marks_unpriced_judges() -> None:
    plan = plan_batch(_config(), 10, 1000).as_dict()
    assert plan["unpriced_judges"] == ["openai/my-local-model"]
    assert [j["priced"] for j in plan["judges"]] == [True, False]
    assert plan["estimated_cost_usd"] is None


def test_store_id_names_a_database_without_its_password() -> None:
    assert store_id("postgresql://u:secret@h/db") == store_id("postgresql+psycopg://u:other@h/db")
    assert store_id("postgresql://u:p@h/db") != store_id("postgresql://u:p@h/other")
    assert store_id("sqlite:///jury.db") != store_id("sqlite:////elsewhere/jury.db")
