"""Submitting a validated batch: record it, then stream its items in waves onto the queues.

Each wave (whole items, about `publish_wave` tasks) is recorded in the store, then queued in
one Redis transaction together with the submission cursor (the number of items queued so
far). The producer waits before a wave while the queues hold more than `max_queued_tasks`, so
Redis memory is bounded whatever the batch size. A producer that dies mid-submission leaves the
batch `submitting`; `jury resume <id>` goes on from the cursor: nothing is queued twice.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from itertools import islice

from celery import Celery
from pydantic import ValidationError
from redis.lock import Lock

from jury.batchfile.loading import BatchSource, describe_validation_error, load_batch
from jury.broker import keys as redis_keys
from jury.broker.redis_client import BrokerRedis
from jury.errors import BatchFileError, JuryError
from jury.producer.publishing import Publisher, cell_samples
from jury.schemas.adaptive import first_round
from jury.schemas.batch import BatchConfig, Item
from jury.schemas.calls import task_refs
from jury.schemas.candidates import source_item_id
from jury.schemas.identifiers import batch_id_problem
from jury.schemas.item_dimensions import item_dimension_names
from jury.schemas.status import BatchState
from jury.schemas.tasks import (
    CellRef,
    GenerationRef,
    SampleRef,
)
from jury.store.repository import (
    add_items,
    batch_source,
    batch_state,
    batch_status,
    create_batch,
    load_config,
    record_published,
    set_batch_state,
    start_batch,
)
from jury.store.sql import Sessions

# The cursor outlives a dead producer by this long (seconds): time enough to resume it.
CURSOR_TTL_S = 30 * 86_400
# A live producer renews its claim on the batch well within this many seconds.
LOCK_TTL_S = 30
# Judge tasks in the first wave: the workers get work in tens of milliseconds instead of
# after a whole wave (JURY_PUBLISH_WAVE) was recorded and queued.
FIRST_WAVE_TASKS = 200


def new_batch_id() -> str:
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def submit_batch(
    source: BatchSource,
    sessions: Sessions,
    app: Celery,
    batch_id: str | None = None,
) -> str:
    """Record the batch and queue every judge task; returns the batch id."""
    batch_id = batch_id or new_batch_id()
    if problem := batch_id_problem(batch_id):  # before anything is recorded
        raise JuryError(problem)
    check_stored_form(source)
    create_batch(
        sessions,
        batch_id,
        source.config,
        str(source.path),
        source.stats.count,
        source.stats.cells,
        items_digest=source.stats.digest,
    )
    _publish_from(source, sessions, app, batch_id, start=0)
    return batch_id


def check_stored_form(source: BatchSource) -> None:
    """The batch's config as the store keeps it must read back as the same config: the
    workers, `jury resume` and the end of submission read it so. Checked before anything is
    recorded or queued, so that no difference between a config as loaded and as stored can
    leave a batch `submitting` with tasks queued."""
    stored = source.config.model_dump(mode="json")
    try:
        again = BatchConfig.model_validate(stored).model_dump(mode="json")
    except ValidationError as exc:
        problems = [f"as stored: {line}" for line in describe_validation_error(exc)]
        raise BatchFileError(str(source.path), problems) from None
    if again != stored:
        changed = sorted(k for k in stored if again.get(k) != stored[k])
        raise BatchFileError(
            str(source.path),
            [
                f"as stored, the batch reads back differently ({', '.join(changed)}): a bug of "
                "jury's, please report it"
            ],
        )


def continue_submission(sessions: Sessions, app: Celery, batch_id: str) -> int:
    """Go on with a batch whose producer stopped mid-submission; returns the items queued now.

    The batch file is read again from where it was submitted, and must still hold the same
    panel, dimensions and items.
    """
    status = batch_status(sessions, batch_id)
    source, digest = _reload_source(sessions, batch_id)
    if digest is not None and source.stats.digest != digest:
        raise JuryError(
            f"the items of {source.items_path or source.path} are not those batch {batch_id} "
            "was submitted with (their content differs, if not their number); it cannot be "
            "continued from them. Put the original items back, or submit a new batch"
        )
    if source.stats.count != status.n_items:
        raise JuryError(
            f"{source.path} now holds {source.stats.count} items, but batch {batch_id} was "
            f"submitted with {status.n_items}; it cannot be continued from a changed file"
        )
    broker = BrokerRedis.from_app(app)
    try:
        cursor_key = redis_keys.submit_cursor(str(app.conf.task_default_queue), batch_id)
        queued = int(broker.client.get(broker.key(cursor_key)) or 0)
    finally:
        broker.close()
    # The store's count lags the cursor by at most one wave; the cursor is lost only with
    # Redis' data, and with it the queued tasks (`jury resume` finds those afterwards).
    start = max(queued, status.n_items_published)
    _publish_from(source, sessions, app, batch_id, start)
    return status.n_items - start


def _reload_source(sessions: Sessions, batch_id: str) -> tuple[BatchSource, str | None]:
    path, digest = batch_source(sessions, batch_id)
    source = load_batch(path)
    stored = load_config(sessions, batch_id)
    if source.config.model_dump(mode="json") != stored.model_dump(mode="json"):
        raise JuryError(
            f"{path} has changed since batch {batch_id} was submitted (judges, dimensions or "
            "settings differ); it cannot be continued from it"
        )
    return source, digest


def _publish_from(
    source: BatchSource, sessions: Sessions, app: Celery, batch_id: str, start: int
) -> None:
    config = source.config
    publisher = Publisher(app, config)
    claim = _claim(publisher.broker, publisher.base_queue, batch_id)
    cursor_key = redis_keys.submit_cursor(publisher.base_queue, batch_id)
    position = start
    try:
        per_item = max(1, source.stats.cells // max(1, source.stats.count))
        per_item *= config.samples_per_cell
        items_per_wave = max(1, publisher.wave_size // per_item)

        def keep_going() -> bool:
            claim.extend(LOCK_TTL_S, replace_ttl=True)
            return batch_state(sessions, batch_id) == BatchState.SUBMITTING

        names = [c.name for c in config.candidates]

        # The items judged on one input's answers go in one wave: its generation writes them.
        def wave_key(item: Item) -> str:
            return source_item_id(item.id, names) if names else item.id

        sizes = wave_sizes(FIRST_WAVE_TASKS // per_item, items_per_wave)
        for chunk in _chunks(islice(source.items(), start, None), sizes, wave_key):
            if not publisher.wait_for_room(len(chunk) * per_item, keep_going) or not keep_going():
                state = batch_state(sessions, batch_id)
                raise JuryError(f"batch {batch_id} was {state.value} during its submission")
            add_items(sessions, batch_id, enumerate(chunk, start=position))
            position += len(chunk)
            cursor = (cursor_key, position, CURSOR_TTL_S)
            if config.candidates:  # judged once their candidates have answered
                publisher.publish_generations(_generation_tasks(batch_id, config, chunk), cursor)
            else:
                publisher.publish(task_refs(config, _judge_tasks(batch_id, config, chunk)), cursor)
            record_published(sessions, batch_id, position)
        start_batch(sessions, batch_id, position, n_cells=source.stats.cells)
        publisher.client.delete(publisher.broker.key(cursor_key))
    except Exception as exc:
        _record_stop(sessions, batch_id, position, exc)
        if isinstance(exc, JuryError):
            raise
        raise JuryError(
            f"submission of batch {batch_id} stopped after {position} items: {exc}. "
            f"`jury resume {batch_id}` goes on from there"
        ) from exc
    finally:
        _release(claim)
        publisher.close()


def _judge_tasks(batch_id: str, config: BatchConfig, items: list[Item]) -> Iterator[SampleRef]:
    samples = first_round(config)  # all of them, unless the batch is adaptive
    for item in items:
        for dimension in item_dimension_names(config, item):
            yield from cell_samples(CellRef(batch_id, item.id, dimension), samples)


def _generation_tasks(
    batch_id: str, config: BatchConfig, items: list[Item]
) -> Iterator[GenerationRef]:
    names = [c.name for c in config.candidates]
    for source in dict.fromkeys(source_item_id(item.id, names) for item in items):
        for name in names:
            yield GenerationRef(batch_id, source, name)


def _record_stop(sessions: Sessions, batch_id: str, position: int, exc: Exception) -> None:
    """Say why the submission stopped, leaving a `submitting` batch resumable."""
    try:
        state = batch_state(sessions, batch_id)
        if state == BatchState.SUBMITTING:
            set_batch_state(
                sessions,
                batch_id,
                state,
                error=f"submission stopped after {position} items: {type(exc).__name__}: {exc}",
            )
    except Exception:
        pass  # the store is what failed; the original error says so


def wave_sizes(first: int, most: int) -> Iterator[int]:
    """Items per wave: the first wave small, so that the workers start judging while the rest
    is being recorded and queued; each next one twice as large, up to `most`."""
    size = max(1, min(first, most))
    while True:
        yield size
        size = min(most, size * 2)


def _chunks(
    items: Iterator[Item], sizes: Iterator[int], key: Callable[[Item], str]
) -> Iterator[list[Item]]:
    """Waves of about the next of `sizes` items; items of one `key` are never split."""
    chunk: list[Item] = []
    size = next(sizes)
    for item in items:
        if len(chunk) >= size and key(item) != key(chunk[-1]):
            yield chunk
            chunk, size = [], next(sizes)
        chunk.append(item)
    if chunk:
        yield chunk


def _claim(broker: BrokerRedis, queue: str, batch_id: str) -> Lock:
    """One producer per batch: a lock naming this process, taken over when its holder on this
    host is no longer alive."""
    client, key = broker.client, broker.key(redis_keys.submit_lock(queue, batch_id))
    me = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    lock = client.lock(key, timeout=LOCK_TTL_S)
    if lock.acquire(blocking=False, token=me):
        return lock
    raw = client.get(key)
    holder = raw.decode() if isinstance(raw, bytes) else str(raw or "")
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host == socket.gethostname() and pid.isdigit() and not _alive(int(pid)):
        client.delete(key)
        if lock.acquire(blocking=False, token=me):
            return lock
    raise JuryError(
        f"another producer ({holder or 'unknown'}) is submitting batch {batch_id}; "
        f"if it is gone, try again within {LOCK_TTL_S} s"
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _release(lock: Lock) -> None:
    with contextlib.suppress(Exception):  # expired or Redis gone: it lapses by itself
        lock.release()
