"""Per-item criteria: an item's focus_areas choose its dimensions from the batch's and the
built-in registry, its custom_criteria add its own; the cells, the plan and combined tasks
follow each item's dimensions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jury.batchfile.planning import plan_batch
from jury.schemas.batch import BatchConfig, Item
from jury.schemas.calls import call_spec, task_refs
from jury.schemas.item_dimensions import ItemDimensions, item_dimension_names, n_cells
from jury.schemas.results import CellSample, SampleResult
from jury.schemas.tasks import SampleRef
from jury.store.engine import session_factory
from jury.store.missing import missing_samples
from jury.store.repository import add_items, batch_status, create_batch
from jury.store.samples import SampleWrite, record_writes

TONE = {"name": "tone", "description": "Is it kind?", "scale": {"min": 1, "max": 10}}


def config(**extra: Any) -> BatchConfig:
    return BatchConfig.model_validate(
        {
            "judges": [{"model": "openai/gpt-4o-mini", "n": 2}],
            "dimensions": [
                {"name": "relevance", "scale": {"min": 1, "max": 10}},
                TONE,
                {"name": "depth", "scale": {"min": 1, "max": 10}, "item_only": True},
            ],
            **extra,
        }
    )


def item(**fields: Any) -> Item:
    return Item.model_validate({"id": "x", "output": "y", **fields})


def loaded(batch: BatchConfig, items: list[Item]) -> tuple[BatchConfig, list[str], int]:
    dimensions = ItemDimensions(batch)
    problems = [p for i in items for p in dimensions.add(i)]
    return dimensions.batch_config(), problems, dimensions.n_cells


def test_an_item_without_criteria_of_its_own_gets_the_batchs_defaults() -> None:
    batch = config()
    assert item_dimension_names(batch, item()) == ("relevance", "tone")  # not item_only depth
    extended, problems, cells = loaded(batch, [item(), item(id="z")])
    assert problems == [] and cells == 4
    assert extended is batch  # nothing chosen: the config is unchanged
    assert not extended.per_item_dimensions


def test_focus_areas_choose_batch_registry_and_own_criteria_in_their_order() -> None:
    chosen = item(
        focus_areas=["depth", "accuracy", "warmth", "tone", "tone"],
        custom_criteria={"warmth": {"name": "WARMTH (1-5)", "description": "Is it warm?"}},
    )
    batch, problems, cells = loaded(config(), [chosen])
    assert problems == []
    assert item_dimension_names(batch, chosen) == ("depth", "accuracy", "warmth", "tone")
    assert cells == 4
    assert batch.per_item_dimensions
    assert [(d.name, d.item_only) for d in batch.dimensions] == [
        ("relevance", False),
        ("tone", False),
        ("depth", True),
        ("accuracy", True),
        ("warmth", True),
    ]
    # The built-in and the item's own criterion take the scale the batch's dimensions share.
    accuracy, warmth = batch.dimension("accuracy"), batch.dimension("warmth")
    assert (accuracy.resolved_scale.min, accuracy.resolved_scale.max) == (1, 10)
    assert "10:" in (accuracy.description or "")  # the registry's rubric, on 1 to 10
    assert warmth.description == "WARMTH (1-5): Is it warm?"
    assert (warmth.resolved_scale.max, warmth.resolved_threshold) == (10, 5.5)
    # Items of the same batch without focus areas still get only the defaults.
    assert item_dimension_names(batch, item(id="plain")) == ("relevance", "tone")


def test_custom_criteria_without_focus_areas_add_to_the_defaults() -> None:
    own = item(
        custom_criteria={
            "brevity": {
                "description": "Is it short?",
                "scale": {"min": 0, "max": 1},
                "threshold": 1,
            }
        }
    )
    batch, problems, cells = loaded(config(), [own])
    assert problems == [] and cells == 3
    assert item_dimension_names(batch, own) == ("relevance", "tone", "brevity")
    brevity = batch.dimension("brevity")
    assert (brevity.resolved_scale.min, brevity.resolved_scale.max, brevity.threshold) == (0, 1, 1)


def test_two_items_may_share_a_criterion_only_alike() -> None:
    warm = {"warmth": {"description": "Is it warm?"}}
    _, problems, _ = loaded(
        config(), [item(id="a", custom_criteria=warm), item(id="b", custom_criteria=warm)]
    )
    assert problems == []
    cold = {"warmth": {"description": "Is it cold?"}}
    _, problems, _ = loaded(
        config(), [item(id="a", custom_criteria=warm), item(id="b", custom_criteria=cold)]
    )
    assert problems == [
        "item 'b': custom_criteria.warmth: item 'a' defines a criterion 'warmth' differently; "
        "criteria of one name must be alike in a batch (give this one another name)"
    ]


def test_bad_criteria_are_named_with_their_item() -> None:
    _, problems, cells = loaded(
        config(),
        [
            item(id="a", focus_areas=["relevance", "sparkle"]),
            item(id="b", custom_criteria={"tone": {"description": "again"}}),
            item(
                id="c", custom_criteria={"odd": {"description": "x", "scale": {"min": 5, "max": 1}}}
            ),
        ],
    )
    assert cells == 0
    assert problems[0].startswith("item 'a': focus_areas names 'sparkle', which is neither one")
    assert "relevance, tone" in problems[0] and "custom_criteria" in problems[0]
    assert problems[1].startswith("item 'b': custom_criteria.tone: 'tone' is already one of")
    assert problems[2] == "item 'c': custom_criteria.odd: scale min (5) must be below max (1)"


def test_cells_and_the_plan_count_each_items_own_dimensions() -> None:
    items = [
        item(id="a"),
        item(id="b", focus_areas=["tone"]),
        item(id="c", focus_areas=["accuracy", "depth", "tone"]),
    ]
    batch, problems, cells = loaded(config(), items)
    assert problems == [] and cells == 2 + 1 + 3 == n_cells(batch, items)
    plan = plan_batch(batch, len(items), 300, cells)
    assert (plan.n_cells, plan.calls) == (6, 6 * 2)
    combined = batch.model_copy(update={"mode": "combined"})
    assert plan_batch(combined, len(items), 300, cells).calls == 3 * 2  # one call per item
    # Without n_cells, the plan is every item on the batch's own dimensions (not item_only).
    assert plan_batch(config(), 3, 300).n_cells == 3 * 2


def test_a_combined_task_scores_its_items_dimensions_and_is_named_once() -> None:
    batch, _, _ = loaded(config(mode="combined"), [item(id="c", focus_areas=["accuracy", "tone"])])
    chosen = item(id="c", focus_areas=["accuracy", "tone"])
    names = item_dimension_names(batch, chosen)
    assert call_spec(batch, "tone", names).dimensions == ("accuracy", "tone")
    assert call_spec(batch, "relevance").dimensions == ("relevance", "tone")  # the defaults
    refs = [SampleRef("b", "c", d, "j", s) for s in (0, 1) for d in names]
    # Named by the first of its dimensions in the batch's order (tone before accuracy there).
    assert list(task_refs(batch, refs)) == [SampleRef("b", "c", "tone", "j", s) for s in (0, 1)]


def test_resume_finds_only_the_samples_each_item_is_judged_on(tmp_path: Path) -> None:
    """`jury resume` and the lost-task watch (store.missing) read each item's dimensions."""
    items = [item(id="a"), item(id="b", focus_areas=["accuracy"])]
    batch, _, cells = loaded(config(), items)
    sessions = session_factory(f"sqlite:///{tmp_path / 'jury.db'}")
    create_batch(sessions, "r1", batch, "test", len(items), cells)
    add_items(sessions, "r1", enumerate(items))
    stored = SampleResult(judge="openai/gpt-4o-mini", sample=0, score=4)
    record_writes(
        sessions, [SampleWrite("r1", "b", [CellSample(dimension="accuracy", result=stored)])]
    )
    missing, failed = missing_samples(sessions, "r1", batch, missing_only=False)
    judge = "openai/gpt-4o-mini"
    assert missing == {
        ("a", "relevance"): [(judge, 0), (judge, 1)],
        ("a", "tone"): [(judge, 0), (judge, 1)],
        ("b", "accuracy"): [(judge, 1)],
    }
    assert failed == {key: [] for key in missing}
    status = batch_status(sessions, "r1")
    assert (status.n_cells, status.n_samples_expected) == (3, 3 * 2)


def test_resume_of_a_generating_batch_reads_only_items_whose_outputs_are_written(
    tmp_path: Path,
) -> None:
    """With candidates, an item waiting for its outputs is no valid item yet: resume (and the
    lost-task watch) skip it rather than fail on it, and judge the others on their own
    dimensions."""
    from jury.store.generations import Generation, record_generation

    def waiting(**fields: Any) -> Item:
        return Item.model_validate({"input": "Hi?", **fields}, context={"generated": True})

    items = [waiting(id="a"), waiting(id="b", focus_areas=["accuracy"])]
    batch, _, cells = loaded(config(candidates=[{"name": "bot", "model": "openai/x"}]), items)
    sessions = session_factory(f"sqlite:///{tmp_path / 'jury.db'}")
    create_batch(sessions, "g1", batch, "test", len(items), cells)
    add_items(sessions, "g1", enumerate(items))
    answer = Generation(candidate="bot", text="Hello.")
    [written] = record_generation(sessions, "g1", "b", answer, ["bot"])
    assert written.output == "Hello."
    missing, _ = missing_samples(sessions, "g1", batch, missing_only=False)
    judge = "openai/gpt-4o-mini"
    assert missing == {("b", "accuracy"): [(judge, 0), (judge, 1)]}
