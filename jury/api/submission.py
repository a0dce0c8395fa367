"""Submitting a batch: read and validate it (a batch file, or a dict and its items), choose
its items (`limit`, `sample`), change its settings (`overrides` and the judge shorthands),
plan it, then record and queue it. `jury submit` is a call of these."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import BaseModel

from jury.api.batch import Batch, resolve_settings
from jury.batchfile.loading import BatchSource, load_batch
from jury.batchfile.overrides import SubmitOptions, sample_items
from jury.batchfile.planning import BatchPlan, plan_batch
from jury.batchfile.starter import first_items
from jury.errors import BatchExistsError, BatchFileError, JuryError
from jury.producer.publishing import check_broker, create_producer_app
from jury.producer.submission import new_batch_id, submit_batch
from jury.schemas.batch import BatchConfig, Item
from jury.schemas.status import BatchState
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.repository import batch_state
from jury.store.sql import Sessions

BatchSpec = str | os.PathLike[str] | Mapping[str, Any]
ItemLike = Mapping[str, Any] | Item

__all__ = ["BatchSpec", "ItemLike", "PreparedBatch", "new_batch_id", "prepare", "submit"]

# How problems in a batch given as a dict name where they are: not the temporary files.
_DICT_BATCH = "the batch (given as a dict)"
_GIVEN_ITEMS = "the items given as `items=` (line N: the Nth item)"


class PreparedBatch:
    """A batch read and validated, with its items chosen and its settings changed, not yet
    queued. A batch given as a dict is written to a temporary folder (so that it is validated
    and recorded exactly as a batch file is); the folder is removed on `close()` (or leaving
    a `with` block), unless a submission stopped half-way needs it to go on (see `submit`)."""

    def __init__(self, source: BatchSource, folder: Path | None = None) -> None:
        self._source = source
        self._folder = folder

    @property
    def config(self) -> BatchConfig:
        return self._source.config

    @property
    def n_items(self) -> int:
        return self._source.stats.count

    @property
    def n_cells(self) -> int:
        """The (item, dimension) verdicts to come: each item's own dimensions."""
        return self._source.stats.cells

    def plan(self) -> BatchPlan:
        """Calls per judge, tokens and estimated cost (`jury submit --dry-run`)."""
        stats = self._source.stats
        return plan_batch(self.config, stats.count, stats.text_chars, stats.cells)

    def submit(
        self,
        batch_id: str | None = None,
        *,
        settings: Settings | None = None,
        on_start: Callable[[str], None] | None = None,
    ) -> Batch:
        """Record the batch and queue its tasks (in waves, waiting for room in the queues);
        returns it once every task is queued. `on_start(batch_id)` is called once the broker
        answered, before anything is recorded. A submission that stops half-way (an error,
        Ctrl-C) leaves the batch `submitting`: `jury resume` goes on from where it stopped;
        for a batch given as a dict, its temporary folder is kept for that, and named in a
        note on the exception."""
        settings = resolve_settings(settings)
        batch_id = batch_id or new_batch_id()
        check_broker(settings)
        sessions = session_factory(settings.database_url)
        if on_start is not None:
            on_start(batch_id)
        try:
            submit_batch(self._source, sessions, create_producer_app(settings), batch_id)
        except (Exception, KeyboardInterrupt) as exc:
            ours = not isinstance(exc, BatchExistsError)  # else the id is another batch's
            if ours and self._folder is not None and _left_submitting(sessions, batch_id):
                exc.add_note(
                    f"batch {batch_id} is kept in {self._folder} for `jury resume {batch_id}`; "
                    "delete that folder once the batch has finished"
                )
                self._folder = None  # kept, not removed by close()
            raise
        return Batch(batch_id, settings, sessions)

    def close(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def __enter__(self) -> PreparedBatch:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _left_submitting(sessions: Sessions, batch_id: str) -> bool:
    try:
        return batch_state(sessions, batch_id) == BatchState.SUBMITTING
    except Exception:  # not recorded, or the store is what failed
        return False


def prepare(
    batch: BatchSpec,
    items: Iterable[ItemLike] | None = None,
    *,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    overrides: Sequence[str] = (),
    temperature: float | None = None,
    concurrency: int | None = None,
    model: str | None = None,
    settings: Settings | None = None,
) -> PreparedBatch:
    """Read and validate a batch: a batch file's path, or a dict shaped like one (with its
    items inline, or given as `items`: dicts or `jury.Item`s, any iterable, streamed to a
    file). BatchFileError names every problem and where it is. `limit` keeps the first items,
    `sample` a reproducible random sample of them (`seed`); `overrides` are `jury submit
    --set` changes (`"judges.0.n=5"`); `temperature`, `concurrency` (each judge's
    max_in_flight) and `model` set every judge's. The judges' calls are checked against the
    egress policy of `settings` (default: the JURY_* environment), as the workers will."""
    if sample is not None and limit is not None:
        raise JuryError("`sample` and `limit` both choose the items: give one")
    options = SubmitOptions(tuple(overrides), temperature, concurrency, model)
    egress = settings.egress_policy() if settings is not None else None
    if isinstance(batch, str | os.PathLike):
        if items is not None:
            raise JuryError(
                "`items=` goes with a batch given as a dict; a batch file names its own"
            )
        return PreparedBatch(
            _chosen(
                load_batch(Path(batch), adjust=options.apply, egress=egress), limit, sample, seed
            )
        )
    folder = Path(tempfile.mkdtemp(prefix="jury-batch-"))
    try:
        path = _write_spec(folder, batch, items)
        try:
            source = load_batch(path, adjust=options.apply, egress=egress)
        except BatchFileError as exc:
            named = {str(path): _DICT_BATCH, str(folder / "items.jsonl"): _GIVEN_ITEMS}
            raise BatchFileError(named.get(exc.source, exc.source), exc.problems) from None
        return PreparedBatch(_chosen(source, limit, sample, seed), folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _chosen(source: BatchSource, limit: int | None, sample: int | None, seed: int) -> BatchSource:
    if limit is not None:
        return first_items(source, limit)
    if sample is not None:
        return sample_items(source, sample, seed)
    return source


def _item_record(item: ItemLike) -> dict[str, Any]:
    if isinstance(item, BaseModel):
        return item.model_dump(mode="json", exclude_defaults=True)
    return dict(item)


def _write_spec(folder: Path, spec: Mapping[str, Any], items: Iterable[ItemLike] | None) -> Path:
    """A batch given as a dict (and items) becomes a batch file like any other, so that it is
    validated, recorded and resumable exactly as `jury submit` would do it."""
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
    temperature: float | None = None,
    concurrency: int | None = None,
    model: str | None = None,
) -> Batch:
    """Validate, record and queue a batch (`prepare`, then `PreparedBatch.submit`); nothing
    is queued when any part is invalid. `settings` default to the JURY_* environment."""
    with prepare(
        batch,
        items,
        limit=limit,
        sample=sample,
        seed=seed,
        overrides=overrides,
        temperature=temperature,
        concurrency=concurrency,
        model=model,
        settings=settings,
    ) as prepared:
        return prepared.submit(batch_id, settings=settings)
