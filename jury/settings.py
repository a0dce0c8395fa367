"""The environment contract (docs/configuration.md), read when a process starts, never at
import."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, field_validator, model_validator

from jury.schemas.heuristic_modules import MODULE_PREFIX, refused_module

if TYPE_CHECKING:
    from jury.schemas.egress import EgressPolicy

DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"
# jury's own Celery pool (jury.worker.engine.pool), selected by JURY_WORKER_POOL=engine.
ENGINE_POOL = "engine"
DEFAULT_DATABASE_URL = "sqlite:///jury.db"
# Settings field -> environment variable (the documented contract, plus tuning knobs).
_ENV_NAMES: dict[str, str] = {
    "broker_url": "JURY_BROKER_URL",
    "database_url": "JURY_DATABASE_URL",
    "queue": "JURY_QUEUE",
    "visibility_timeout_s": "JURY_VISIBILITY_TIMEOUT",
    "restore_interval_s": "JURY_RESTORE_INTERVAL",
    "restore_lock_timeout_s": "JURY_RESTORE_LOCK_TIMEOUT",
    "sweep_interval_s": "JURY_SWEEP_INTERVAL",
    "broker_transport_options": "JURY_BROKER_TRANSPORT_OPTIONS",
    "broker_use_ssl": "JURY_BROKER_USE_SSL",
    "broker_wait_s": "JURY_BROKER_WAIT",
    "worker_concurrency": "JURY_WORKER_CONCURRENCY",
    "worker_window": "JURY_WORKER_WINDOW",
    "worker_memory_mb": "JURY_WORKER_MEMORY_MB",
    "worker_pool": "JURY_WORKER_POOL",
    "worker_processes": "JURY_WORKER_PROCESSES",
    "heartbeat_timeout_s": "JURY_HEARTBEAT_TIMEOUT",
    "task_events": "JURY_TASK_EVENTS",
    "max_attempts": "JURY_MAX_ATTEMPTS",
    "rate_horizon_s": "JURY_RATE_HORIZON",
    "rate_margin": "JURY_RATE_MARGIN",
    "lanes": "JURY_LANES",
    "max_queued_tasks": "JURY_MAX_QUEUED",
    "publish_wave": "JURY_PUBLISH_WAVE",
    "retry_base_delay_s": "JURY_RETRY_BASE_DELAY",
    "retry_max_delay_s": "JURY_RETRY_MAX_DELAY",
    "batch_api_step_s": "JURY_BATCH_API_STEP",
    "batch_api_window_s": "JURY_BATCH_API_WINDOW",
    "batch_api_poll_s": "JURY_BATCH_API_POLL",
    "batch_api_lock_s": "JURY_BATCH_API_LOCK",
    # Heuristic judges (docs/limits-and-security.md#heuristic-judges)
    "heuristic_callables": "JURY_HEURISTIC_CALLABLES",
    "heuristic_processes": "JURY_HEURISTIC_PROCESSES",
    "heuristic_memory_mib": "JURY_HEURISTIC_MEMORY_MIB",
    # `jury flower` (docs/limits-and-security.md)
    "flower_hosts": "JURY_FLOWER_HOSTS",
    "egress_allow": "JURY_EGRESS_ALLOW",
    "egress_public": "JURY_EGRESS_PUBLIC",
    "key_hosts": "JURY_KEY_HOSTS",
    "plain_vars": "JURY_PLAIN_VARS",
    "metrics_port": "JURY_METRICS_PORT",
    "metrics_address": "JURY_METRICS_ADDRESS",
}
# The egress policy's settings (jury.schemas.egress) and their variables: the producer and
# a call made outside a worker's runtime read them alone.
EGRESS_FIELDS = ("egress_allow", "egress_public", "key_hosts", "plain_vars")
EGRESS_ENV = {field: _ENV_NAMES[field] for field in EGRESS_FIELDS}


# Broker transport options jury sets from its own settings, and the variable that sets each.
_JURY_TRANSPORT_OPTIONS = {
    "visibility_timeout": "JURY_VISIBILITY_TIMEOUT",
    "body_encoding": "nothing: jury needs None",
    "unacked_restore_interval": "JURY_RESTORE_INTERVAL",
    "unacked_restore_throttle": "nothing: jury needs 1",
    "unacked_mutex_expire": "JURY_RESTORE_LOCK_TIMEOUT",
}


def _env_value(value: object) -> str:
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)


def lane_queue(queue: str, panel_position: int, lanes: int) -> str:
    """The queue of the judge at `panel_position`: its lane among `lanes`."""
    return f"{queue}.lane{panel_position % lanes}"


def judge_lanes(queue: str, lanes: int, judges: Sequence[str]) -> dict[str, str]:
    """Each judge of a panel (names in panel order) and its lane: judges of one panel never
    share a queue (up to `lanes` judges), so a slow or tightly limited model cannot hold up a
    fast one. Producer and workers route by this one mapping."""
    return {judge: lane_queue(queue, n, lanes) for n, judge in enumerate(judges)}


def deployment_queues(queue: str, lanes: int) -> list[str]:
    """Every queue of a deployment: the base queue and its lanes."""
    return [queue, *(lane_queue(queue, n, lanes) for n in range(lanes))]


def store_id(database_url: str) -> str:
    """A short fingerprint of the database a process uses, without its password: a producer
    compares its own with the workers' (`jury_store_id` in their Celery config) to tell a
    worker that writes elsewhere. A SQLite file is named by host and absolute path, since a
    relative path counts from each process's own folder."""
    if database_url.startswith("sqlite:///") and database_url != "sqlite:///:memory:":
        path = os.path.abspath(database_url.removeprefix("sqlite:///").partition("?")[0])
        where = f"sqlite:{socket.gethostname()}:{path}"
    else:
        scheme, _, rest = database_url.partition("://")
        credentials, at, host = rest.rpartition("@")
        where = f"{scheme.split('+')[0]}://{credentials.split(':')[0]}{at}{host}"
    return hashlib.sha256(where.encode()).hexdigest()[:16]


class Settings(BaseModel):
    broker_url: str = DEFAULT_BROKER_URL
    database_url: str = DEFAULT_DATABASE_URL
    # Queue name: lets several jury deployments (or test runs) share one Redis.
    queue: str = Field(default="jury", pattern=r"^[A-Za-z0-9_.:-]+$")
    # Seconds a task may stay unacknowledged before Redis hands it to another worker.
    visibility_timeout_s: int = Field(default=3600, gt=0)
    # How often each worker scans for the unacknowledged tasks of dead workers (kombu's
    # restore sweep). A dead worker's tasks come back after visibility_timeout_s plus at most
    # this long.
    restore_interval_s: int = Field(default=10, gt=0)
    # The restore sweep runs under one Redis lock per database. A worker killed while holding
    # it blocks every restore until the lock expires (kombu's default: 300 s), so ours is short.
    restore_lock_timeout_s: int = Field(default=30, gt=0)
    # How often one worker (elected through a Redis lock) finalizes cells whose samples are all
    # stored but whose verdict is missing.
    sweep_interval_s: float = Field(default=30.0, gt=0)
    # Celery's own broker options, honoured alike by Celery and by every Redis client jury
    # makes (jury.broker.redis_client): e.g. {"global_keyprefix": "team-a:"} or, with a
    # sentinel:// URL, {"master_name": "mymaster"}. JSON in the environment.
    broker_transport_options: dict[str, Any] = Field(default_factory=dict)
    # Celery's `broker_use_ssl` for a rediss:// URL, e.g. {"ssl_cert_reqs": "required",
    # "ssl_ca_certs": "/etc/ssl/ca.pem"}. JSON in the environment.
    broker_use_ssl: dict[str, Any] | None = None
    # How long a starting worker waits for Redis to answer (one line per attempt) before it
    # gives up and exits non-zero; 0: one attempt.
    broker_wait_s: float = Field(default=120.0, ge=0, le=86_400)
    # The most judge tasks one worker process holds in flight at once: the ceiling of its
    # window (Celery's prefetch count), each task a coroutine on the process's event loop,
    # waiting on the network. The window starts at worker_window and adapts
    # (jury.worker.engine.window): it doubles while calls wait and CPU is spare, shrinks back
    # toward worker_window under CPU pressure or a provider's push-back, and below it only
    # when the process's RSS passes worker_memory_mb. 4096 lets one worker saturate a 10 s
    # judge (about 200 judgments/s, docs/benchmarks/concurrency.md); each call in flight is a
    # socket, so the open-files limit must allow it (the worker raises its soft limit).
    worker_concurrency: int = Field(default=4096, gt=0)
    worker_window: int = Field(default=256, gt=0)
    worker_memory_mb: int = Field(default=450, gt=0)
    # engine: jury's pool (jury.worker.engine.pool), task bodies on one event loop per process;
    # threads, prefork, solo: Celery's own, each task's body then waits in its thread.
    worker_pool: str = ENGINE_POOL
    # Worker processes one `jury worker` runs, forked from one parent that imported LiteLLM
    # once, so that they share its pages (jury.worker.supervisor); 0: one per core.
    worker_processes: int = Field(default=1, ge=0, le=64)
    # A worker silent this long is dead: the tasks it held are queued again (engine pool).
    heartbeat_timeout_s: float = Field(default=30.0, gt=0)
    # Providers' Batch APIs (jury.worker.calls.provider_batches): seconds between a worker's steps;
    # how long requests gather before a provider batch is submitted; the shortest poll
    # interval; how long a submitter's or poller's lock lasts unrenewed (a dead one's work is
    # taken over then).
    batch_api_step_s: float = Field(default=1.0, gt=0)
    batch_api_window_s: float = Field(default=5.0, ge=0)
    batch_api_poll_s: float = Field(default=5.0, gt=0)
    batch_api_lock_s: float = Field(default=30.0, gt=0)
    # Task events from the start: Flower turns them on anyway (every 5 s, for every worker)
    # while it runs; they cost a worker about a third of its CPU per judgment.
    task_events: bool = False
    max_attempts: int = Field(default=4, gt=0)
    # A judge call whose rate-limit slot is at most this far ahead waits for it on the
    # worker's event loop (holding no thread); further ahead, the task is parked. 6 s, not 3:
    # against a provider counting its quota per second on a busy host, parked tasks coming
    # back late left gaps in the sends (docs/benchmarks/ratelimit.md: at least 0.95 of the
    # quota in 10 runs of 12 at 6 s, in 6 of 10 at 3 s).
    rate_horizon_s: float = Field(default=6.0, gt=0)
    # Calls are spaced this fraction wider than a judge's rpm/tpm (see worker.ratelimit).
    rate_margin: float = Field(default=0.02, ge=0, lt=1)
    # Judge tasks are spread over this many queues (lanes) by panel position, so that a slow
    # or tightly limited model does not hold up the others.
    lanes: int = Field(default=8, ge=1, le=64)
    # Back-pressure: the producer publishes a wave only while fewer than this many judge tasks
    # wait in the queues, so Redis holds about max_queued_tasks × 0.9 KB whatever the batch
    # size.
    max_queued_tasks: int = Field(default=50_000, ge=1)
    # Judge tasks per wave: one Redis transaction, with the submission cursor.
    publish_wave: int = Field(default=5_000, ge=1)
    retry_base_delay_s: float = Field(default=1.0, ge=0)
    retry_max_delay_s: float = Field(default=30.0, ge=0)
    # The egress policy (jury.schemas.egress; docs/limits-and-security.md): hosts a batch's
    # api_base and HTTP candidates may reach although they are loopback, private or otherwise
    # special (`loopback`, `private`, hosts, addresses, networks, each with an optional port);
    # whether public hosts may be reached; where each key variable's value may be sent (JSON:
    # {"VAR": ["host", …]}, over the providers' built-in lists); the variables a `${VAR}`
    # may take anywhere, holding no secret.
    egress_allow: str = ""
    egress_public: bool = True
    key_hosts: dict[str, list[str]] = Field(default_factory=dict)
    plain_vars: str = "JURY_SIMULATOR_URL"

    # --- Heuristic judges (jury.schemas.heuristics, jury.worker.judging.heuristic_pool) ---
    # The module prefixes callable heuristics may come from (comma-separated in the
    # environment: "team_metrics,acme.scoring"); empty, the default: callables are off. A
    # callable is code run on the workers, so only the operator turns them on; os,
    # subprocess, builtins, shutil and the like are refused whatever this says.
    heuristic_callables: list[str] = Field(default_factory=list, max_length=100)
    # Processes each worker process keeps to measure heuristic samples in, each killed at
    # its judge's timeout_s (a pattern or a function that runs on is stopped, and the
    # worker's own threads, its heartbeat among them, never wait for it).
    heuristic_processes: int = Field(default=2, ge=1, le=64)
    # The address space each of those processes may take (RLIMIT_AS), in MiB.
    heuristic_memory_mib: int = Field(default=2048, ge=256)

    # More names `jury flower` answers to than the address it listens on (a proxy's name,
    # this machine's DNS name), comma-separated; any other Host header gets 421.
    flower_hosts: list[str] = Field(default_factory=list, max_length=100)

    @field_validator("flower_hosts", mode="before")
    @classmethod
    def _host_names(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("heuristic_callables", mode="before")
    @classmethod
    def _module_prefixes(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list):
            return value
        for prefix in value:
            if not isinstance(prefix, str) or not MODULE_PREFIX.fullmatch(prefix):
                raise ValueError(f"{prefix!r} is not a module prefix (`package.module`)")
            if refused_module(prefix):
                raise ValueError(
                    f"{prefix!r} is a module no callable heuristic may come from, whatever "
                    "is allowed (os, subprocess, builtins, shutil and the like)"
                )
        return value

    def broker_url_source(self) -> str:
        """Where broker_url came from, as a message about the broker names it."""
        if "broker_url" in self.model_fields_set:
            return "JURY_BROKER_URL"
        return "the default, as JURY_BROKER_URL is unset"

    # Where each worker process serves its metrics for Prometheus (docs/monitoring.md): a
    # port, or a range `9464-9471` of which each process takes the first free one (several
    # workers on one host); empty or 0: none, and nothing is recorded.
    metrics_port: str = ""
    # The interface it listens on: loopback unless told (0.0.0.0 in a container).
    metrics_address: str = "127.0.0.1"

    @property
    def all_queues(self) -> list[str]:
        return deployment_queues(self.queue, self.lanes)

    @property
    def metrics_ports(self) -> range:
        """The ports JURY_METRICS_PORT names, in order (empty: no metrics)."""
        low, _, high = self.metrics_port.replace(" ", "").partition("-")
        first = int(low or 0)
        return range(first, int(high or first) + 1) if first else range(0)

    @field_validator("metrics_port")
    @classmethod
    def _port_range(cls, value: str) -> str:
        found = re.fullmatch(r"(\d{1,5})(?:-(\d{1,5}))?", value.replace(" ", ""))
        first, last = (int(found[1]), int(found[2] or found[1])) if found else (-1, -1)
        if value.strip() and not (first == last == 0 or 0 < first <= last <= 65535):
            raise ValueError(
                f"{value[:40]!r}: a port (1-65535), a range of ports like 9464-9471, or 0 for none"
            )
        return value

    @field_validator("broker_transport_options", "broker_use_ssl", "key_hosts", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else None
            except ValueError as exc:
                raise ValueError(f"must be a JSON object: {exc}") from None
        return value

    @field_validator("broker_transport_options")
    @classmethod
    def _not_ours(cls, value: dict[str, Any]) -> dict[str, Any]:
        # Options jury sets from its own settings: one place each, never two that disagree.
        ours = sorted(set(value) & set(_JURY_TRANSPORT_OPTIONS))
        if ours:
            names = ", ".join(f"{o} (set {_JURY_TRANSPORT_OPTIONS[o]})" for o in ours)
            raise ValueError(f"jury sets these broker transport options itself: {names}")
        return value

    @model_validator(mode="after")
    def _egress_parses(self) -> Settings:
        self.egress_policy()  # a bad entry stops the process at its start, naming the setting
        return self

    def egress_policy(self) -> EgressPolicy:
        """The egress policy these settings describe."""
        from jury.schemas.egress import EgressPolicy

        return EgressPolicy.build(
            self.egress_allow, self.egress_public, self.key_hosts, self.plain_vars
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        return cls.model_validate({f: env[v] for f, v in _ENV_NAMES.items() if env.get(v)})

    @classmethod
    def egress_from_env(cls, env: Mapping[str, str] | None = None) -> EgressPolicy:
        """The egress policy of the environment's settings alone (what `jury submit` checks a
        batch against), whatever the other settings say."""
        env = os.environ if env is None else env
        names = {f: _ENV_NAMES[f] for f in EGRESS_FIELDS}
        return cls.model_validate(
            {f: env[v] for f, v in names.items() if env.get(v)}
        ).egress_policy()

    @property
    def pool_size(self) -> int:
        """Celery's --concurrency for this worker: the engine's ceiling (its window adapts
        below it); under Celery's own pools, a thread or a process per task, the window's
        start (JURY_WORKER_WINDOW), not 4096 of them."""
        if self.worker_pool == ENGINE_POOL:
            return self.worker_concurrency
        return min(self.worker_concurrency, self.worker_window)

    def to_env(self) -> dict[str, str]:
        """The JURY_* variables that make another process (a worker) read these settings."""
        return {name: _env_value(getattr(self, field)) for field, name in _ENV_NAMES.items()}

    def celery_config(self) -> dict[str, object]:
        """Celery settings both sides must agree on (producer and worker build their own app)."""
        # JSON bodies stored as-is, not base64: a third less Redis memory per queued task.
        broker_transport = {
            **self.broker_transport_options,
            "visibility_timeout": self.visibility_timeout_s,
            "body_encoding": None,
            "unacked_restore_interval": self.restore_interval_s,
            "unacked_restore_throttle": 1,
            "unacked_mutex_expire": self.restore_lock_timeout_s,
        }
        return {
            "broker_url": self.broker_url,
            "task_serializer": "json",
            "result_serializer": "json",
            "accept_content": ["json"],
            "task_default_queue": self.queue,
            "task_acks_late": True,
            "task_reject_on_worker_lost": True,
            "worker_prefetch_multiplier": 1,
            "broker_transport_options": broker_transport,
            "broker_use_ssl": self.broker_use_ssl,
            # No result backend: outcomes live in the store, and Flower reads task events.
            "result_backend": None,
            "broker_connection_retry_on_startup": True,
            # A publish during a Redis restart waits for it (about 20 s) instead of failing.
            "task_publish_retry": True,
            "task_publish_retry_policy": {
                "max_retries": 12,
                "interval_start": 0.2,
                "interval_step": 0.5,
                "interval_max": 3.0,
            },
            "worker_hijack_root_logger": False,
            # Task events for Flower: off until a monitor asks (Flower sends Celery's
            # enable_events command to every worker, again and again while it runs), since
            # three events per task cost a worker about a third of its CPU per judgment.
            "worker_send_task_events": self.task_events,
            "task_send_sent_event": True,
            # Ours: the producer routes judge tasks to `{queue}.lane{panel position % lanes}`.
            "jury_lanes": self.lanes,
            "jury_max_queued": self.max_queued_tasks,
            "jury_publish_wave": self.publish_wave,
            # The producer parks a rate-limited judge's tasks until near their slot
            # (producer.pacing), with the workers' horizon and margin.
            "jury_rate_horizon_s": self.rate_horizon_s,
            "jury_rate_margin": self.rate_margin,
            # Which database this process uses (a fingerprint): `submit --wait` asks workers.
            "jury_store_id": store_id(self.database_url),
        }
