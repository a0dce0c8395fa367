"""jury from Python: for scripts and notebooks, without shelling out to the CLI.

Against a running deployment (workers on JURY_BROKER_URL, results in JURY_DATABASE_URL)::

    import jury

    batch = jury.submit("batch.yaml")              # or a dict and an iterable of items
    batch.wait()                                   # a progress bar until it finishes
    results = batch.results()                      # typed records, samples, failures
    for record in results.records:
        print(record.item_id, record.criterion_id, record.consensus_metrics.final_score)
    frame = results.to_pandas()                    # with pandas installed (extra `pandas`)

On a machine with nothing running, `evaluate` does it all as `jury demo` does: it starts a
private Redis (unless one answers), a worker and, with `simulator=True`, the judge simulator,
judges the batch into a temporary database, reads the results and stops everything::

    results = jury.evaluate(
        {"judges": [{"model": "openai/balanced", "api_base": "${JURY_SIMULATOR_URL}"}],
         "dimensions": ["relevance"]},
        items=[{"id": "q1", "input": "How do I reset my password?", "output": "Use the link."}],
        simulator=True,
    )
    print(results.to_pandas()[["item_id", "criterion_id", "final_score"]])
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from rich.console import Console

from jury.batchfile.loading import load_batch
from jury.batchfile.overrides import SubmitOptions, sample_items
from jury.batchfile.starter import first_items
from jury.errors import JuryError
from jury.producer.diagnosis import watch_batch
from jury.producer.following import Display, follow_batch, interrupted
from jury.results.csv_records import csv_columns, record_row
from jury.results.labelled import read_records
from jury.results.samples import SAMPLE_COLUMNS, sample_record
from jury.schemas.batch import Item
from jury.schemas.outcome import JudgeFailures
from jury.schemas.results import Verdict
from jury.schemas.status import BatchStatus
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.inspection import StoredSample, iter_batch_samples
from jury.store.outcome import judge_failures
from jury.store.repository import batch_status, load_config
from jury.store.sql import Sessions

if TYPE_CHECKING:
    import pandas

BatchSpec = str | os.PathLike[str] | Mapping[str, Any]
ItemLike = Mapping[str, Any] | Item

PANDAS_MISSING = (
    "to_pandas() needs pandas, which jury installs only as an optional extra: "
    "pip install 'jury-panel[pandas]' (or pip install pandas) in this environment. Without "
    "it, the same data is in `results.records` (typed records) and `results.rows()` "
    "(plain dicts, one per record; `rows(samples=True)`, one per judgment)."
)


@dataclass
class Results:
    """What a batch produced, read into memory: its status, its result records (one per item
    and dimension), every judgment behind them, and a summary of each failing judge."""

    status: BatchStatus
    records: list[Verdict]
    samples: list[StoredSample]
    failures: list[JudgeFailures]
    judges: list[str]
    pairwise: bool = False
    methods: list[str] = field(default_factory=list)  # aggregation.also_across_models
    pass_vote: bool = False  # the batch's pass_vote: vote_share, passed_by_vote columns

    def rows(self, samples: bool = False) -> list[dict[str, Any]]:
        """One flat dict per record (the CSV columns of `jury results --format csv`), or with
        `samples`, one per judgment (those of `jury results --samples`)."""
        if samples:
            return [sample_record(s) for s in self.samples]
        columns = csv_columns(
            self.judges, self.pairwise, methods=self.methods, pass_vote=self.pass_vote
        )
        return [
            dict(
                zip(
                    columns,
                    record_row(
                        r,
                        self.judges,
                        self.pairwise,
                        methods=self.methods,
                        pass_vote=self.pass_vote,
                    ),
                    strict=True,
                )
            )
            for r in self.records
        ]

    def to_pandas(self, samples: bool = False) -> pandas.DataFrame:
        """The records (or, with `samples`, the judgments) as a pandas DataFrame."""
        try:
            import pandas
        except ImportError:
            raise JuryError(PANDAS_MISSING) from None
        columns = (
            SAMPLE_COLUMNS
            if samples
            else csv_columns(
                self.judges, self.pairwise, methods=self.methods, pass_vote=self.pass_vote
            )
        )
        frame = pandas.DataFrame(self.rows(samples), columns=columns)
        return frame.replace({"": None}) if not samples else frame


@dataclass
class Batch:
    """A submitted batch: follow it, read its status and its results."""

    id: str
    settings: Settings
    sessions: Sessions = field(repr=False)

    def status(self) -> BatchStatus:
        return batch_status(self.sessions, self.id)

    def wait(self, timeout: float | None = None, progress: bool = True) -> BatchStatus:
        """Follow the batch until it finishes, with a progress bar (in a terminal or a
        notebook) unless `progress` is False; says when no live worker serves its queues.
        Raises JuryError at `timeout`; KeyboardInterrupt stops waiting, not the batch."""
        display = Display.BAR if progress else Display.QUIET
        watch = watch_batch(self.settings, self.sessions, self.id)
        try:
            status = follow_batch(self.sessions, self.id, Console(), timeout, display, None, watch)
        except KeyboardInterrupt:
            print(interrupted(self.id))
            raise
        if status is None:
            raise JuryError(f"batch {self.id} is still running after {timeout:g} s")
        return status

    def results(self) -> Results:
        """Everything the batch stored so far, read into memory (records and judgments)."""
        config = load_config(self.sessions, self.id)
        return Results(
            status=self.status(),
            records=list(read_records(self.sessions, self.id, config)),
            samples=list(iter_batch_samples(self.sessions, self.id)),
            failures=judge_failures(self.sessions, self.id, config),
            judges=[j.name for j in config.panel],
            pairwise=config.pairwise is not None,
            methods=config.aggregation.reported_methods,
            pass_vote=config.pass_vote,
        )


def _item_record(item: ItemLike) -> dict[str, Any]:
    if isinstance(item, BaseModel):
        return item.model_dump(mode="json", exclude_defaults=True)
    return dict(item)


def _write_spec(spec: Mapping[str, Any], items: Iterable[ItemLike] | None) -> Path:
    """A batch given as a dict (and items) becomes a batch file like any other, so that it is
    validated, recorded and resumable exactly as `jury submit` would do it."""
    folder = Path(tempfile.mkdtemp(prefix="jury-batch-"))
    data = dict(spec)
    if items is not None:
        if "items" in data:
            raise JuryError("give the items either in the batch (`items`) or as `items=`, not both")
        try:
            with (folder / "items.jsonl").open("w", encoding="utf-8") as out:
                for item in items:
                    out.write(json.dumps(_item_record(item)) + "\n")
        except (TypeError, ValueError) as exc:
            raise JuryError(f"an item cannot be written as JSON: {exc}") from None
        data["items"] = "items.jsonl"
    path = folder / "batch.json"
    try:
        path.write_text(json.dumps(data), encoding="utf-8")
    except (TypeError, ValueError) as exc:
        raise JuryError(f"the batch cannot be written as JSON: {exc}") from None
    return path


def submit(
    batch: BatchSpec,
    items: Iterable[ItemLike] | None = None,
    *,
    batch_id: str | None = None,
    limit: int | None = None,
    settings: Settings | None = None,
    sample: int | None = None,
    seed: int = 0,
    overrides: Sequence[str] = (),
) -> Batch:
    """Validate and submit a batch: a batch file's path, or a dict shaped like one (with its
    items inline, or given as `items`: dicts or `jury.Item`s). Nothing is enqueued when any
    part is invalid (JuryError says what and where). `settings` default to the JURY_*
    environment; `limit` judges the first items only, `sample` a reproducible random sample
    of them (`seed`); `overrides` are `jury submit --set` changes (`"judges.0.n=5"`)."""
    from jury.producer.publishing import check_broker, create_producer_app
    from jury.producer.submission import submit_batch

    path = Path(batch) if isinstance(batch, str | os.PathLike) else _write_spec(batch, items)
    if isinstance(batch, str | os.PathLike) and items is not None:
        raise JuryError("`items=` goes with a batch given as a dict; a batch file names its own")
    if sample is not None and limit is not None:
        raise JuryError("`sample` and `limit` both choose the items: give one")
    egress = settings.egress_policy() if settings is not None else None
    source = load_batch(path, adjust=SubmitOptions(tuple(overrides)).apply, egress=egress)
    if limit is not None:
        source = first_items(source, limit)
    if sample is not None:
        source = sample_items(source, sample, seed)
    settings = settings or Settings.from_env()
    check_broker(settings)
    sessions = session_factory(settings.database_url)
    found = submit_batch(source, sessions, create_producer_app(settings), batch_id)
    return Batch(found, settings, sessions)


def evaluate(
    batch: BatchSpec,
    items: Iterable[ItemLike] | None = None,
    *,
    simulator: bool = False,
    embedded: bool | None = None,
    timeout: float | None = 600,
    progress: bool = True,
) -> Results:
    """Judge a small batch end to end and return its results.

    With JURY_BROKER_URL set, the batch goes to that deployment's workers. Without it (or
    with `embedded=True`), this runs on the embedded default, as `jury demo` does: the Redis
    of JURY_BROKER_URL or the one that answers on 127.0.0.1 (else a private one), a worker of
    its own on a queue of its own, and a temporary SQLite database, all stopped (and the
    database deleted) before it returns. `simulator=True` also starts the judge simulator and
    sets JURY_SIMULATOR_URL, for judges whose `api_base` names it."""
    if embedded is None:
        embedded = not os.environ.get("JURY_BROKER_URL")
    if not embedded:
        submitted = submit(batch, items)
        submitted.wait(timeout, progress)
        return submitted.results()
    from jury.local.demo import embedded_stack

    console = Console(quiet=not progress)
    with tempfile.TemporaryDirectory(prefix="jury-evaluate-") as folder:
        database = f"sqlite:///{Path(folder) / 'jury.db'}"
        with embedded_stack(console, simulator, database) as stack:
            submitted = submit(batch, items, settings=stack.settings)
            try:
                submitted.wait(timeout, progress)
            except JuryError:
                stack.failed = True
                raise
            results = submitted.results()
        submitted.sessions.kw["bind"].dispose()  # close the database before it is deleted
        return results
