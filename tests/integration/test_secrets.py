"""Provider keys stay in the workers' environment: a planted key must not appear in the
database, Redis (task messages, results, chord state), a log, or any output of `jury`."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import cast

import pytest
import redis
from click.testing import CliRunner

from jury.cli.main import jury as cli
from jury.local.services import ManagedProcess
from jury.worker.calls.llm_errors import classify_error
from tests.conftest import WorkerStarter, settings_for, worker_env
from tests.integration.test_cli import jury
from tests.integration.test_pipeline import write_batch

pytestmark = pytest.mark.integration


def redis_dump(url: str) -> bytes:
    """Every value in the test database, whatever its type."""
    client = redis.Redis.from_url(url)
    chunks: list[bytes] = []
    # The client does not decode responses: every value it returns is bytes (hence the casts).
    try:
        for key in client.scan_iter(count=1000):
            kind = client.type(key)
            if kind == b"string":
                chunks.append(cast(bytes | None, client.get(key)) or b"")
            elif kind == b"list":
                chunks += cast(list[bytes], client.lrange(key, 0, -1))
            elif kind == b"hash":
                fields = cast(dict[bytes, bytes], client.hgetall(key))
                chunks += [k + v for k, v in fields.items()]
            elif kind == b"set":
                chunks += list(cast(set[bytes], client.smembers(key)))
            elif kind == b"zset":
                scored = cast(list[tuple[bytes, float]], client.zrange(key, 0, -1, withscores=True))
                chunks += [m for m, _ in scored]
            chunks.append(key)
    finally:
        client.close()
    return b"\n".join(chunks)


def test_planted_keys_leak_nowhere(
    tmp_path: Path, redis_url: str, simulator: ManagedProcess, start_workers: WorkerStarter
) -> None:
    named_key = f"sk-planted-{secrets.token_hex(12)}"
    openai_key = f"sk-openai-planted-{secrets.token_hex(12)}"
    keys = {"JURY_TEST_PLANTED_KEY": named_key, "OPENAI_API_KEY": openai_key}
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    [worker] = start_workers(settings, **keys)
    judges = [
        {"model": "openai/balanced", "n": 2, "api_key_env": "JURY_TEST_PLANTED_KEY"},
        {"model": "openai/strict", "n": 1},  # reads OPENAI_API_KEY
        {"model": "openai/balanced@broken", "n": 1, "api_key_env": "JURY_TEST_PLANTED_KEY"},
    ]
    batch = write_batch(tmp_path, simulator, judges)
    env = {**worker_env(settings), **keys}
    submitted = jury(["submit", str(batch), "--wait", "--timeout", "90"], env, tmp_path)
    batch_id = submitted.stdout.strip().splitlines()[-1]
    outputs = [submitted.stdout + submitted.stderr]
    runner = CliRunner()
    for command in (
        ["status", batch_id, "--json"],
        *(["results", batch_id, "--format", fmt] for fmt in ("json", "jsonl", "csv", "table")),
    ):
        result = runner.invoke(cli, command, env=env)
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    assert '"n_failed": 1' in outputs[2]  # the broken judge's errors are in the results

    places = {
        "database": b"".join(p.read_bytes() for p in tmp_path.glob("jury.db*")),
        "redis": redis_dump(redis_url),
        "worker log": worker.log_path.read_bytes() if worker.log_path else b"",
        "jury output": "".join(outputs).encode(),
    }
    assert len(places["database"]) > 10_000 and places["worker log"]
    for where, content in places.items():
        for key in keys.values():
            assert key.encode() not in content, f"a provider key leaked into the {where}"


def test_error_messages_are_redacted() -> None:
    key = "sk-secret-abcdef123456"
    error = classify_error(RuntimeError(f"401: Incorrect API key provided: {key}"), key)
    assert key not in str(error) and "***" in str(error)
