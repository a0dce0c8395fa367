"""Every Redis key jury names, spelled in this one module (as arq keeps its keys in one).

Each is a name under the broker's `global_keyprefix` (BrokerRedis.key adds it). Two kinds:

- A deployment's own (a deployment is a base queue, `JURY_QUEUE`): its workers' heartbeats
  and ledgers, its locks, and every key of a batch it runs (submit cursor and lock, its
  mark, its budget meter). Two deployments sharing one Redis never read each other's, even
  for the same batch id: a batch id is unique in its deployment's database only.
- Shared by every deployment on the Redis, on purpose: a model's rate-limit state (one
  provider key, one quota: `jury:rl:{<api_base|model hash>}:…`), the set of the models'
  waiting lines, and the parked set (each member names the queue it goes back to).
"""

from __future__ import annotations

import re
from typing import NamedTuple

ROOT = "jury:"

# Shared: one model's quota, whoever calls it (jury.worker.limits.redis_limiter).
RATE_LIMIT_PREFIX = ROOT + "rl:"
# Shared: the set of every model's waiting line (jury.broker.parking, the limiter).
WAITING_LINES = RATE_LIMIT_PREFIX + "lines"
# Shared: parked tasks, "<queue key>\n<message>" by when they are due (jury.broker.parking).
PARKED = ROOT + "parked"

_WAITERS_SUFFIX = ":waiters"


class ModelKeys(NamedTuple):
    """A model's rate-limit keys, under one hash tag (one Redis Cluster slot)."""

    rpm: str  # requests per minute: the theoretical arrival time (GCRA)
    tpm: str  # tokens per minute: its theoretical arrival time
    cool: str  # a 429's cool-down, while it lasts
    inflight: str  # calls in flight: token -> lease end (a sorted set)
    defer: str  # the next deferred start, beyond the horizon
    pace: str  # the fraction of the quota calls are spaced for
    cap: str  # max_in_flight, as the last caller set it
    waiters: str  # the waiting line for an in-flight slot (a list)
    sends: str  # the send gate's latest sends (a list, the latest first)


def model_keys(prefix: str, model: str) -> ModelKeys:
    """`prefix`: RATE_LIMIT_PREFIX under the broker's prefix; `model`: the limiter's key."""
    base = f"{prefix}{{{model}}}"
    return ModelKeys(*(f"{base}:{name}" for name in ModelKeys._fields))


def model_keys_of_line(line: str) -> ModelKeys:
    """The keys of the model whose waiting line `line` is (a full key, prefixes included)."""
    base = line.removesuffix(_WAITERS_SUFFIX)
    return ModelKeys(*(f"{base}:{name}" for name in ModelKeys._fields))


def _deployment(queue: str) -> str:
    return f"{ROOT}deployment:{queue}:"


def glob_escape(text: str) -> str:
    """`text` as itself in a SCAN/ZSCAN MATCH pattern."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def deployment_pattern(queue: str) -> str:
    """A SCAN pattern for every key of the deployment (its batches' and its workers')."""
    return f"{ROOT}deployment:{glob_escape(queue)}:*"


# A deployment's workers.
def heartbeats(queue: str) -> str:
    """worker id -> its last beat (Redis' clock), a sorted set (jury.worker.engine.liveness)."""
    return _deployment(queue) + "heartbeats"


def windows(queue: str) -> str:
    """worker id -> its window and calls in flight (JSON), a hash written with each beat
    (jury.worker.engine.window; `jury status` shows the live workers')."""
    return _deployment(queue) + "windows"


def held(queue: str, worker_id: str) -> str:
    """The delivery tags one worker holds (its ledger, a set)."""
    return _deployment(queue) + f"held:{worker_id}"


def reaper_lock(queue: str) -> str:
    return _deployment(queue) + "reaper"


def sweeper_lock(queue: str) -> str:
    return _deployment(queue) + "sweeper"


def batch_api_lock(queue: str, name: str) -> str:
    """A provider-batch step's lock (jury.worker.calls.provider_batches)."""
    return _deployment(queue) + f"batch_api:{name}"


# A batch, under the deployment that runs it.
# The mark outlives the batch's last wave by this long (seconds).
BATCH_MARK_TTL_S = 90 * 86_400


def batch_mark(queue: str, batch_id: str) -> str:
    """The batch was published here (its value: the queue), for the lost-task watch."""
    return _deployment(queue) + f"batch:{batch_id}:mark"


def idle_since(queue: str, batch_id: str) -> str:
    """Since when the lost-task watch has seen the batch stand still (jury.worker.engine)."""
    return _deployment(queue) + f"batch:{batch_id}:idle"


def submit_cursor(queue: str, batch_id: str) -> str:
    """How many items are queued, set in the same transaction as their tasks."""
    return _deployment(queue) + f"batch:{batch_id}:cursor"


def submit_lock(queue: str, batch_id: str) -> str:
    """Which producer is submitting (or resuming) the batch."""
    return _deployment(queue) + f"batch:{batch_id}:lock"


class BudgetKeys(NamedTuple):
    """A batch's budget meter (jury.worker.limits.budget), amounts in nano-dollars."""

    cap: str  # max_cost_usd, as submit or resume set it
    spent: str  # what settled calls cost
    reserved: str  # what calls in flight may cost, at most (their estimates)
    leases: str  # reservation token -> when it lapses (a sorted set)
    amounts: str  # reservation token -> its amount (a hash)
    closed: str  # set when the budget stopped the batch: no call reserves any more


def budget(queue: str, batch_id: str) -> BudgetKeys:
    base = _deployment(queue) + f"batch:{batch_id}:budget:"
    return BudgetKeys(*(base + name for name in BudgetKeys._fields))


def all_of_batch(queue: str, batch_id: str) -> list[str]:
    """Every key of a batch, for cleaning up after it."""
    return [
        batch_mark(queue, batch_id),
        idle_since(queue, batch_id),
        submit_cursor(queue, batch_id),
        submit_lock(queue, batch_id),
        *budget(queue, batch_id),
    ]
