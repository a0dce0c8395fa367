"""schemas.output_sets: an item's N outputs as its pair items, and the standings read back
from the pair records (per item and over the batch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jury.batchfile.loading import load_batch
from jury.errors import BatchFileError
from jury.schemas.output_sets import OutputRankings, expand_outputs, pair_names, pair_of
from jury.schemas.pairwise import PairwiseOutcome, winner_of

RUNS = {"id": "q1", "input": "Who?", "outputs": {"bm25": "x", "dense": "y", "hybrid": "z"}}


def outcome(preference: float | None) -> PairwiseOutcome:
    return PairwiseOutcome(
        winner=None if preference is None else winner_of(preference, 0.5),
        preference=preference,
        score_a=None,
        score_b=None,
        tie_tolerance=0.5,
        n_judgments=1,
        n_agreeing=1,
        agreement_pct=100.0,
        n_position_consistent=1,
        position_consistency_pct=100.0,
        first_position_bias=0.0,
    )


def test_every_pair_once_in_the_order_written() -> None:
    pairs = expand_outputs(RUNS, pairwise=True)
    assert [(p["id"], p["output_a"], p["output_b"]) for p in pairs] == [
        ("q1 [bm25 vs dense]", "x", "y"),
        ("q1 [bm25 vs hybrid]", "x", "z"),
        ("q1 [dense vs hybrid]", "y", "z"),
    ]
    assert all(p["input"] == "Who?" and "outputs" not in p for p in pairs)
    assert pair_of("q1 [bm25 vs dense]") == ("q1", "bm25", "dense")
    assert pair_of("a [b] [c vs d]") == ("a [b]", "c", "d")
    assert pair_names("q1 [bm25 vs dense]") == ("bm25", "dense")
    assert pair_of("q1") is None and pair_of("q1 [a vs b c]") is None
    assert expand_outputs({"id": "q2", "output": "o"}, pairwise=False) == [
        {"id": "q2", "output": "o"}
    ]


@pytest.mark.parametrize(
    ("fields", "pairwise", "says"),
    [
        ({**RUNS}, False, "only a pairwise batch compares an item's `outputs`"),
        ({"id": "q", "outputs": {"a": "x"}}, True, "must map 2 to 20 names"),
        ({"id": "q", "outputs": ["x", "y"]}, True, "must map 2 to 20 names"),
        ({"id": "q", "outputs": {"a b": "x", "c": "y"}}, True, "may hold only ASCII"),
        ({"id": "q", "outputs": {"a": "x", "c": 3}}, True, "['c'] are not text"),
        ({"id": "q", "outputs": {"a": "x", "c": "y"}, "label": "A"}, True, "has no label"),
        ({"id": "q [a vs b]", "output_a": "x", "output_b": "y"}, True, "choose another id"),
    ],
)
def test_bad_outputs_are_refused(fields: dict[str, Any], pairwise: bool, says: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        expand_outputs(fields, pairwise)
    assert says in str(info.value)


def test_standings_per_item_and_over_the_batch() -> None:
    rankings = OutputRankings()
    # q1: dense beats bm25 by 2, hybrid beats bm25 by 1, dense and hybrid tie.
    rankings.add("q1 [bm25 vs dense]", outcome(-2.0))
    rankings.add("q1 [bm25 vs hybrid]", outcome(-1.0))
    rankings.add("q1 [dense vs hybrid]", outcome(0.25))
    # q2: bm25 beats dense; the other pairs undecided (no score).
    rankings.add("q2 [bm25 vs dense]", outcome(3.0))
    rankings.add("q2 [bm25 vs hybrid]", outcome(None))
    rankings.add("plain-item", outcome(1.0))  # not a pair item: not counted
    report = rankings.report()
    q1 = {row["output"]: row for row in report["items"]["q1"]}
    assert (q1["dense"]["wins"], q1["dense"]["losses"], q1["dense"]["ties"]) == (1, 0, 1)
    assert q1["dense"]["mean_preference"] == pytest.approx((2.0 + 0.25) / 2)
    assert q1["bm25"]["mean_preference"] == pytest.approx(-1.5) and q1["bm25"]["rank"] == 3
    assert [r["output"] for r in report["items"]["q1"]] == ["dense", "hybrid", "bm25"]
    assert q1["hybrid"]["win_rate"] == pytest.approx(0.75)
    overall = {row["output"]: row for row in report["overall"]}
    assert overall["bm25"]["wins"] == 1 and overall["bm25"]["losses"] == 2
    assert overall["bm25"]["undecided"] == 1 and overall["hybrid"]["undecided"] == 1
    assert sum(r["wins"] for r in report["overall"]) == sum(r["losses"] for r in report["overall"])
    assert set(report["items"]) == {"q1", "q2"}


def test_load_expands_outputs_into_pair_items(tmp_path: Path) -> None:
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        "judges: [openai/gpt-4o-mini]\ndimensions: [relevance]\npairwise: {orders: single}\n"
        "items:\n- {id: q1, input: Who?, outputs: {bm25: x, dense: y, hybrid: z}}\n"
        "- {id: q2, output_a: p, output_b: q}\n"
    )
    source = load_batch(batch)
    assert [i.id for i in source.items()] == [
        "q1 [bm25 vs dense]",
        "q1 [bm25 vs hybrid]",
        "q1 [dense vs hybrid]",
        "q2",
    ]
    assert source.stats.count == 4
    batch.write_text(batch.read_text().replace("hybrid: z", "hybrid: 3"))
    with pytest.raises(BatchFileError) as info:
        load_batch(batch)
    assert info.value.problems == ["items[0]: the outputs ['hybrid'] are not text"]
