"""Hostile answers: the score reader on pathological text, and a hostile provider answering
jury's real LLM client over HTTP (the simulator's --hostile kinds; the runner starts it and
passes its URL in JURY_CORPUS_SIMULATOR_URL)."""

from __future__ import annotations

import asyncio
import functools
import os
import time
from pathlib import Path

from jury.errors import ScoreParseError
from jury.schemas.batch import Dimension, Item, Judge, Scale
from jury.schemas.results import SampleResult
from jury.simulator.hostile import HOSTILE_REASONING
from jury.worker.calls.llm_client import complete
from jury.worker.judging.judge_calls import RetryPolicy, judge_call, task_messages
from jury.worker.judging.parsing import parse_score
from tests.adversarial.cases import case

FIVE = Scale(min=1, max=5)
TRICKLE_MS = 20  # a ~350-byte answer takes about 7 s


def unparseable(text: str, kind: str = "unparseable", why: str = "") -> None:
    try:
        parsed = parse_score(text, FIVE)
    except ScoreParseError as exc:
        assert exc.kind == kind, f"{exc.kind}: {exc}"
        assert why in str(exc), str(exc)[:300]
        return
    raise AssertionError(f"read a score of {parsed.score} from {text[:60]!r}")


# --- scores: never guessed, and never a long search -------------------------------------------


@case("scores", "unparseable: Score: 1e309 is not 1")
def score_overflow(folder: Path) -> None:
    unparseable("Score: 1e309", why="not a finite number")


@case("scores", "unparseable: a JSON score of 1e309")
def score_json_overflow(folder: Path) -> None:
    unparseable('{"score": 1e309, "reasoning": "fine"}', why="not a finite number")


@case("scores", "out of scale: 5e-1 is 0.5, not 5")
def score_half_read_whole(folder: Path) -> None:
    unparseable("Score: 5e-1", kind="out_of_scale")


@case("scores", "unparseable: 2/10 on a 1..5 scale is not converted")
def score_other_scale(folder: Path) -> None:
    unparseable("Score: 2/10", why="out of 10")


@case("scores", "unparseable: score tags that disagree")
def score_disagreeing_tags(folder: Path) -> None:
    unparseable("<score>1</score> on second thought <score>5</score>", why="disagree")


@case("scores", "unparseable: two JSON objects that disagree")
def score_disagreeing_json(folder: Path) -> None:
    unparseable('First {"score": 4}. Revised: {"score": 2}', why="disagree")


@case("scores", "unparseable at once: an answer of 5 million characters", max_mib=48)
def score_huge_answer(folder: Path) -> None:
    unparseable('{"score": 4, "reasoning": "' + "x" * 5_000_000 + '"}', why="more than any")


@case("scores", "unparseable, fast: 500,000 opening braces")
def score_many_braces(folder: Path) -> None:
    unparseable("{" * 500_000)


@case("scores", "unparseable, fast: 200,000 nested unclosed objects")
def score_nested_unclosed(folder: Path) -> None:
    unparseable('{"a": ' * 200_000)


@case("scores", "unparseable: a score of 100,000 digits")
def score_long_digits(folder: Path) -> None:
    unparseable("Score: " + "9" * 100_000, why="not a finite number")


@case("scores", "read: a fraction out of the scale's maximum")
def score_fraction_of_the_scale(folder: Path) -> None:
    assert parse_score('{"score": "4/5"}', FIVE).score == 4.0


# --- a hostile provider, through jury's LLM client --------------------------------------------


def judged(kind: str, **settings: float) -> SampleResult:
    """One sample from the simulator's hostile model `balanced@KIND`, one attempt, priced."""
    judge = Judge(
        model=f"openai/balanced@{kind}",
        api_base=os.environ["JURY_CORPUS_SIMULATOR_URL"],
        input_cost_per_token=1e-6,
        output_cost_per_token=1e-6,
        **settings,
    )
    item, dimension = Item(id="a", output="Use the reset link."), Dimension(name="relevance")
    messages = task_messages(item, [dimension], [None])
    call = judge_call(
        judge, [dimension], [None], messages, 0, complete, RetryPolicy(max_attempts=1)
    )
    [sample] = _loop().run_until_complete(call)
    return sample.result


@functools.cache
def _loop() -> asyncio.AbstractEventLoop:
    """One event loop for every call of the process, as a worker keeps one (LiteLLM keeps its
    HTTP sessions per loop)."""
    return asyncio.new_event_loop()


def warm_up() -> None:
    """One well-behaved call before the cases are measured: LiteLLM imports its provider
    code at the first call (seconds on a busy machine), which no case should be charged."""
    assert judged("warm-up").score is not None


def failed(kind: str, *kinds: str) -> SampleResult:
    sample = judged(kind)
    assert sample.score is None and sample.error_kind in kinds, (sample.error_kind, sample.error)
    assert sample.cost_usd >= 0
    return sample


@case("provider", "error sample: a body of garbage bytes")
def provider_garbage_bytes(folder: Path) -> None:
    failed("garbage-bytes", "server_error", "provider_error")


@case("provider", "error sample: a body that is not UTF-8")
def provider_invalid_utf8(folder: Path) -> None:
    failed("invalid-utf8", "server_error", "provider_error")


@case("provider", "unparseable sample: an answer of 2 million characters")
def provider_huge_answer(folder: Path) -> None:
    assert "more than any judge answer" in (failed("huge-answer", "unparseable").error or "")


@case("provider", "bad_usage sample: negative token counts, no negative cost")
def provider_negative_usage(folder: Path) -> None:
    sample = failed("negative-usage", "bad_usage")
    assert sample.cost_usd == 0 and sample.prompt_tokens == 0


@case("provider", "error sample: fractional token counts")
def provider_fractional_usage(folder: Path) -> None:
    failed("fractional-usage", "bad_usage", "server_error", "provider_error")


@case("provider", "bad_usage sample: a quadrillion tokens")
def provider_absurd_usage(folder: Path) -> None:
    failed("absurd-usage", "bad_usage")


@case("provider", "a score, counted conservatively: no usage at all")
def provider_missing_usage(folder: Path) -> None:
    sample = judged("missing-usage")
    assert sample.score is not None and sample.prompt_tokens > 0 and sample.cost_usd > 0


@case("provider", "a score, its reasoning kept as data: markup and escape sequences")
def provider_markup_reasoning(folder: Path) -> None:
    sample = judged("markup-reasoning")
    assert sample.score is not None and sample.reasoning == HOSTILE_REASONING


@case("provider", "timeout sample within timeout_s: an answer that trickles a byte at a time")
def provider_trickle(folder: Path) -> None:
    started = time.monotonic()
    sample = judged("trickle", timeout_s=1)
    took = time.monotonic() - started
    assert sample.error_kind == "timeout" and took < 3, f"{sample.error_kind} after {took:.1f} s"
