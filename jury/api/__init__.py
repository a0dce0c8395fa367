"""jury from Python: for scripts and notebooks, and the one implementation the `jury`
command calls (jury.cli). A library: it prints nothing unless asked for a progress bar,
reads the JURY_* environment only when no `settings=` is given, leaves no temporary files,
and raises the errors of jury.errors.

Against a running deployment (workers on JURY_BROKER_URL, results in JURY_DATABASE_URL)::

    import jury

    batch = jury.submit("batch.yaml")              # or a dict and an iterable of items
    batch.wait()                                   # a progress bar until it finishes
    results = batch.results()                      # typed records, samples, failures
    frame = results.to_pandas()                    # with pandas installed (extra `pandas`)
    jury.attach(batch.id).status()                 # the same batch, from anywhere

On a machine with nothing running, `evaluate` does it all as `jury demo` does (see
jury.api.evaluate). Modules: submission (validate, plan, record and queue), batch (a
recorded batch: status, following, results, cancel, resume), results (what it produced,
in memory), evaluate (end to end in one call).
"""

from __future__ import annotations

from jury.api.batch import Batch, Cancellation, Resumption, attach, resolve_settings
from jury.api.evaluate import evaluate
from jury.api.results import Results
from jury.api.submission import (
    BatchSpec,
    ItemLike,
    PreparedBatch,
    new_batch_id,
    prepare,
    submit,
)

__all__ = [
    "Batch",
    "BatchSpec",
    "Cancellation",
    "ItemLike",
    "PreparedBatch",
    "Results",
    "Resumption",
    "attach",
    "evaluate",
    "new_batch_id",
    "prepare",
    "resolve_settings",
    "submit",
]
