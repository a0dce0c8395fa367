"""`jury.evaluate`: a small batch judged end to end in one call, on a deployment or on the
embedded default (`jury demo`'s: its own worker, and the judge simulator if asked)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

from rich.console import Console

from jury.api.batch import resolve_settings
from jury.api.results import Results
from jury.api.submission import BatchSpec, ItemLike, submit
from jury.errors import JuryError
from jury.settings import Settings
from jury.store.engine import release_engine

SIMULATOR_IS_LOCAL = (
    "simulator=True starts the judge simulator on this machine, for a worker of evaluate's "
    "own on this machine (embedded); a deployment's workers (embedded=False) may run "
    "elsewhere and cannot be counted on to reach it. Leave `embedded` out (or True) to judge "
    "with the simulator, or run `jury simulate` where the workers can reach it and name its "
    "URL in the judges' `api_base`."
)


def evaluate(
    batch: BatchSpec,
    items: Iterable[ItemLike] | None = None,
    *,
    simulator: bool = False,
    embedded: bool | None = None,
    timeout: float | None = 600,
    progress: bool = True,
    settings: Settings | None = None,
) -> Results:
    """Judge a small batch end to end and return its results.

    With a broker named (JURY_BROKER_URL, or `settings` giving a `broker_url`), the batch
    goes to that deployment's workers. Without one, with `embedded=True`, or with
    `simulator=True`, it runs on the embedded default, as `jury demo` does: the named Redis
    or the one that answers on 127.0.0.1 (else a private one), a worker of its own on a queue
    of its own, and a temporary SQLite database, all stopped (and the database deleted)
    before it returns. `simulator=True` also starts the judge simulator, whose URL is
    JURY_SIMULATOR_URL while the batch runs, for judges whose `api_base` names it."""
    settings = resolve_settings(settings)
    if simulator and embedded is False:
        raise JuryError(SIMULATOR_IS_LOCAL)
    if embedded is None:
        embedded = simulator or "broker_url" not in settings.model_fields_set
    if not embedded:
        submitted = submit(batch, items, settings=settings)
        submitted.wait(timeout, progress)
        return submitted.results(wait=False)
    from jury.local.demo import embedded_stack

    console = Console(quiet=not progress, stderr=True)
    with tempfile.TemporaryDirectory(prefix="jury-evaluate-") as folder:
        database = f"sqlite:///{Path(folder) / 'jury.db'}"
        try:
            with embedded_stack(console, simulator, database, settings) as stack:
                submitted = submit(batch, items, settings=stack.settings)
                try:
                    submitted.wait(timeout, progress)
                except JuryError:
                    stack.failed = True
                    raise
                return submitted.results(wait=False)
        finally:
            release_engine(database)  # its connections closed before the file is deleted
