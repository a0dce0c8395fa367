"""A batch in the store, found by id: its status, following it, its results, cancelling and
resuming it. `jury.submit` returns one; `jury.attach(batch_id)` finds one again, in this
process or another. The CLI's `status`, `results`, `cancel` and `resume` are calls of these."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

from pydantic import ValidationError
from rich.console import Console

from jury.api.results import Results
from jury.errors import BatchRunningError, ConfigurationError, WaitTimeoutError
from jury.producer.control import cancel_batch, drop_parked_tasks, raise_budget, resume_batch
from jury.producer.diagnosis import watch_batch
from jury.producer.following import Display, follow_batch, interrupted
from jury.producer.publishing import check_broker, create_producer_app
from jury.producer.submission import continue_submission
from jury.results.labelled import read_records
from jury.results.provider_batches import open_provider_batches
from jury.schemas.batch import BatchConfig
from jury.schemas.outcome import JudgeFailures
from jury.schemas.results import Verdict
from jury.schemas.status import BatchState, BatchStatus
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.inspection import StoredSample, iter_batch_samples
from jury.store.outcome import judge_failures
from jury.store.repository import batch_state, batch_status, load_config
from jury.store.sql import Sessions


def resolve_settings(settings: Settings | None) -> Settings:
    """The caller's settings, or the JURY_* environment's, read once here."""
    if settings is not None:
        return settings
    try:
        return Settings.from_env()
    except ValidationError as exc:
        raise ConfigurationError(f"bad JURY_* environment: {exc}") from None


@dataclass(frozen=True)
class Cancellation:
    """What `Batch.cancel()` did."""

    state: BatchState  # cancelled, or how the batch had already ended (then nothing changed)
    parked_dropped: int  # its tasks that waited for a rate-limit slot, removed
    open_provider_batches: int  # provider batches (`batch_api`) the workers cancel next poll


@dataclass(frozen=True)
class Resumption:
    """What `Batch.resume()` queued."""

    # A batch whose producer stopped mid-submission goes on from there: the items queued now.
    items_continued: int | None = None
    samples: int = 0  # judgments queued again (no stored result, or a failed one)
    cells: int = 0  # the (item, dimension) cells they belong to
    generation_items: int = 0  # items whose candidates' outputs are generated again

    @property
    def queued(self) -> bool:
        return self.items_continued is not None or bool(self.cells or self.generation_items)


@dataclass
class Batch:
    """A submitted batch: follow it, read its status and results, cancel or resume it."""

    id: str
    settings: Settings
    # The batch's store (SQLAlchemy sessions), for reading more than this class offers.
    sessions: Sessions = field(repr=False)

    def status(self) -> BatchStatus:
        return batch_status(self.sessions, self.id)

    def config(self) -> BatchConfig:
        """The batch's configuration as recorded (after `--set`, with its budget now)."""
        return load_config(self.sessions, self.id)

    def records(self) -> Iterator[Verdict]:
        """Its result records stored so far, one per (item, dimension), read as a stream."""
        return read_records(self.sessions, self.id, self.config())

    def samples(self) -> Iterator[StoredSample]:
        """Every judgment stored so far, failed ones included, read as a stream."""
        return iter_batch_samples(self.sessions, self.id)

    def failures(self) -> list[JudgeFailures]:
        """One summary per judge with failed judgments: kinds, counts, a message."""
        return judge_failures(self.sessions, self.id, self.config())

    def follow(
        self,
        console: Console,
        timeout: float | None = None,
        display: Display = Display.BAR,
        out: IO[str] | None = None,
    ) -> BatchStatus | None:
        """Follow the batch until it finishes, drawn on `console` as `display` says (JSON
        lines go to `out`), saying when no live worker serves its queues; None if `timeout`
        ran out first. KeyboardInterrupt stops following, not the batch."""
        watch = watch_batch(self.settings, self.sessions, self.id)
        return follow_batch(self.sessions, self.id, console, timeout, display, out, watch)

    def wait(self, timeout: float | None = None, progress: bool = True) -> BatchStatus:
        """Wait until the batch finishes, with a progress bar (in a terminal or a notebook)
        unless `progress` is False. Raises WaitTimeoutError at `timeout`; KeyboardInterrupt
        stops waiting, not the batch (its message says how to go on)."""
        display = Display.BAR if progress else Display.QUIET
        try:
            status = self.follow(Console(stderr=True), timeout, display)
        except KeyboardInterrupt:
            raise KeyboardInterrupt(interrupted(self.id)) from None
        if status is None:
            raise WaitTimeoutError(f"batch {self.id} is still running after {timeout:g} s")
        return status

    def results(self, wait: bool = True, timeout: float | None = None) -> Results:
        """Everything the finished batch stored, read into memory (records and judgments).

        A batch still running is waited for first (silently; `timeout` as for `wait`), or,
        with `wait=False`, raises BatchRunningError. What is stored so far is in
        `records()` and `samples()`."""
        status = self.status()
        if not status.status.finished:
            if not wait:
                raise BatchRunningError(
                    f"batch {self.id} is {status.status.value} ({status.n_verdicts} of "
                    f"{status.n_cells} verdicts so far): results(wait=True), the default, "
                    "waits for it; records() reads what is stored so far"
                )
            status = self.wait(timeout, progress=False)
        config = self.config()
        return Results(
            status=status,
            records=list(read_records(self.sessions, self.id, config)),
            samples=list(self.samples()),
            failures=judge_failures(self.sessions, self.id, config),
            judges=[j.name for j in config.panel],
            pairwise=config.pairwise is not None,
            methods=config.aggregation.reported_methods,
            pass_vote=config.pass_vote,
        )

    def cancel(self) -> Cancellation:
        """Stop the batch: workers skip its queued tasks, its tasks parked for a rate-limit
        slot are dropped, its open provider batches are cancelled at the workers' next poll;
        what was stored stays. A batch that already ended is left as it is."""
        state = cancel_batch(self.sessions, self.id)
        dropped = drop_parked_tasks(self.settings, self.id) if state == BatchState.CANCELLED else 0
        return Cancellation(state, dropped, open_provider_batches(self.sessions, self.id))

    def resume(
        self, missing_only: bool = False, max_cost_usd: float | None = None, force: bool = False
    ) -> Resumption:
        """Queue again what the batch lacks: the judgments with no stored result, and (unless
        `missing_only`) those that failed; or go on with the submission of a batch whose
        producer stopped. `max_cost_usd` sets a new budget first (a batch stopped at its
        cap). Waits for room in the queues as a submission does.

        Never pays twice: a running batch whose tasks are still alive (queued, held by a
        worker, parked, waiting for a slot) raises LiveTasksError; `force` queues only what no
        live task will produce."""
        check_broker(self.settings)
        if max_cost_usd is not None:
            raise_budget(self.sessions, self.settings, self.id, max_cost_usd)
        app = create_producer_app(self.settings)
        if batch_state(self.sessions, self.id) == BatchState.SUBMITTING:
            return Resumption(items_continued=continue_submission(self.sessions, app, self.id))
        plan = resume_batch(self.sessions, app, self.id, missing_only, force)
        return Resumption(
            samples=plan.n_samples,
            cells=len(plan.cells),
            generation_items=len({ref.item_id for ref in plan.generations}),
        )


def attach(batch_id: str, *, settings: Settings | None = None) -> Batch:
    """The batch `batch_id` in the store of `settings` (default: the JURY_* environment);
    UnknownBatchError when no such batch is recorded there."""
    settings = resolve_settings(settings)
    sessions = session_factory(settings.database_url)
    batch_status(sessions, batch_id)  # raises UnknownBatchError
    return Batch(batch_id, settings, sessions)
