"""No silent waits: while a batch is followed, ask the workers (Celery's remote control) which
queues they consume and which database they use, and say so when no live worker serves the
batch's queues, or when the ones that do write to another database.

`WorkerWatch` asks in a background thread every PROBE_INTERVAL_S, so the progress display
never stalls on a broadcast; `diagnose` (pure) turns what it saw into one paragraph or None.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from celery import Celery
from kombu.utils.url import maybe_sanitize_url
from sqlalchemy.engine import make_url

from jury.broker.redis_client import outage
from jury.errors import ConfigurationError
from jury.settings import Settings, judge_lanes, store_id
from jury.store.repository import load_config
from jury.store.sql import Sessions

PROBE_INTERVAL_S = 5.0
# How long Celery collects replies to one broadcast.
REPLY_TIMEOUT_S = 1.5
# No worker seen for this long (since following began, or since the last one was seen): say so.
NO_WORKER_AFTER_S = 6.0


@dataclass(frozen=True)
class WorkerView:
    """What the live workers answered: node → (queues consumed, database fingerprint)."""

    nodes: dict[str, tuple[frozenset[str], str | None]]


# Returns the workers' view, or raises when the broker cannot be asked.
Probe = Callable[[], WorkerView]


def celery_probe(app: Celery) -> Probe:
    def probe() -> WorkerView:
        inspect = app.control.inspect(timeout=REPLY_TIMEOUT_S)
        queues = inspect.active_queues() or {}
        confs = (inspect.conf() or {}) if queues else {}
        return WorkerView(
            {
                node: (
                    frozenset(q.get("name", "") for q in consumed or []),
                    (confs.get(node) or {}).get("jury_store_id"),
                )
                for node, consumed in queues.items()
            }
        )

    return probe


@dataclass(frozen=True)
class Where:
    """The settings a worker must share with this command, shown without passwords."""

    queues: tuple[str, ...]
    broker: str
    database: str
    queue: str
    store: str

    @classmethod
    def of(cls, settings: Settings, queues: list[str]) -> Where:
        try:
            database = make_url(settings.database_url).render_as_string(hide_password=True)
        except Exception:
            database = "(unparseable)"
        return cls(
            tuple(queues),
            str(maybe_sanitize_url(settings.broker_url)),
            database,
            settings.queue,
            store_id(settings.database_url),
        )


def diagnose(
    where: Where,
    view: WorkerView | None,
    unanswered_s: float,
    broker_error: str | None,
    broker_down_since: str | None = None,
) -> str | None:
    """One paragraph about why the batch may not be moving, or None when workers serve it.

    `view` is the last answer (None: none yet); `unanswered_s`, how long no worker serving the
    batch's queues has been seen; `broker_error`, why the broker could not be asked, since
    `broker_down_since` (a time of day): the same words for as long as it lasts."""
    if broker_error is not None and unanswered_s >= NO_WORKER_AFTER_S:
        since = f" since {broker_down_since}" if broker_down_since else ""
        return (
            f"Redis unreachable{since}, retrying: cannot ask the workers through the broker at "
            f"{where.broker} ({broker_error}). Check that Redis runs and that JURY_BROKER_URL "
            "is right; the batch goes on without this command."
        )
    serving = {
        node: store
        for node, (queues, store) in (view.nodes.items() if view else [])
        if queues & set(where.queues)
    }
    if not serving:
        if unanswered_s < NO_WORKER_AFTER_S:
            return None
        queues = ", ".join(where.queues)
        return (
            f"no live worker serves this batch's queues ({queues}). "
            f"The batch waits in Redis; nothing is lost. Start a worker (`jury worker`), or "
            f"check that the workers use the same settings as this command: "
            f"JURY_BROKER_URL={where.broker}, JURY_QUEUE={where.queue} and "
            f"JURY_DATABASE_URL={where.database}, on both sides."
        )
    elsewhere = sorted(node for node, store in serving.items() if store not in (None, where.store))
    if not elsewhere:
        return None
    every = "the workers" if len(elsewhere) == len(serving) else "some workers"
    return (
        f"{every} serving this batch's queues ({', '.join(elsewhere)}) use another database "
        f"than this command (JURY_DATABASE_URL={where.database}): they cannot find the batch, "
        "and the tasks they take are lost. Give them the same JURY_DATABASE_URL (a relative "
        "SQLite path counts from each process's own folder), then `jury resume` the batch."
    )


@dataclass
class WorkerWatch:
    """Asks the workers in the background; `message()` is the current diagnosis."""

    probe: Probe
    where: Where
    clock: Callable[[], float] = time.monotonic
    interval_s: float = PROBE_INTERVAL_S
    _view: WorkerView | None = None
    _error: str | None = None  # the first error of the current outage, kept as it lasts
    _error_since: str | None = None
    _last_served: float = 0.0
    # While a probe is out: when it was sent (monotonic, and as a time of day).
    _probing_since: tuple[float, str] | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> WorkerWatch:
        self._last_served = self.clock()
        self._thread = threading.Thread(target=self._run, name="jury-worker-watch", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.check()
            self._stop.wait(self.interval_s)

    def check(self) -> None:
        sent = (self.clock(), f"{datetime.now().astimezone():%H:%M:%S}")
        self._probing_since = sent
        try:
            view = self.probe()
        except Exception as exc:
            shown = str(exc) if isinstance(exc, ConfigurationError) else None
            self._broker_down(sent[1], shown or f"{type(exc).__name__}: {exc}")
            return
        finally:
            self._probing_since = None
        self._view, self._error, self._error_since = view, None, None
        if any(queues & set(self.where.queues) for queues, _ in view.nodes.values()):
            self._last_served = self.clock()

    def _broker_down(self, since: str, error: str) -> None:
        if self._error is None:  # one line for the whole outage: its first words, kept
            self._error, self._error_since = " ".join(error.split()), since

    def message(self) -> str | None:
        probing = self._probing_since
        if probing is not None and self.clock() - probing[0] > REPLY_TIMEOUT_S + 1:
            # Asking takes longer than any answer: the broker's connection is gone (kombu
            # waits for it to come back, or fails after some seconds): not "no live worker".
            self._broker_down(probing[1], "it does not answer")
        unanswered = self.clock() - self._last_served
        return diagnose(self.where, self._view, unanswered, self._error, self._error_since)

    def stop(self) -> None:
        self._stop.set()


def watch_batch(settings: Settings, sessions: Sessions, batch_id: str) -> WorkerWatch:
    """A watch (not started) over the queues that the batch's judges are routed to."""
    from jury.producer.publishing import create_producer_app

    try:
        judges = [j.name for j in load_config(sessions, batch_id).panel]
        queues = sorted(set(judge_lanes(settings.queue, settings.lanes, judges).values()))
    except Exception as exc:  # the store is away: following says so; watch every lane
        if outage(exc) is None:
            raise
        queues = sorted(settings.all_queues)
    try:
        probe = celery_probe(create_producer_app(settings))
    except Exception as exc:  # a broker URL Celery cannot use: said like an unreachable one
        probe = _cannot_ask(f"{type(exc).__name__}: {exc}")
    return WorkerWatch(probe, Where.of(settings, queues))


def _cannot_ask(reason: str) -> Probe:
    def probe() -> WorkerView:
        raise ConfigurationError(reason)

    return probe
