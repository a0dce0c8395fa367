"""Placeholders stay placeholders (issue 18, part 3): a value planted in the environment and
named by `${VAR}` in every string field of a judge that takes one (model, api_base,
api_key_env) is used by the worker for its calls, and found in no Redis key or value,
database row, log line, output format, report or Flower task field."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
import yaml

from jury.local.services import ManagedProcess, free_port, wait_for
from jury.settings import Settings
from tests.conftest import WorkerStarter, worker_env
from tests.integration.test_cli import jury
from tests.integration.test_flower_browser import Flower, flower, watched_by_flower  # noqa: F401 (the fixture)
from tests.integration.test_secrets import redis_dump

pytestmark = pytest.mark.integration


def planted_batch(folder: Path, simulator: ManagedProcess) -> Path:
    # A token in the path, as some gateways take it (the simulator answers under any prefix).
    with_token = simulator.url.removesuffix("/v1") + "/gateway/${JURY_TEST_PLANTED_BASE}/v1"
    unreachable = f"http://127.0.0.1:{free_port()}/gateway/${{JURY_TEST_PLANTED_BASE}}/v1"
    spec = {
        "name": "placeholders",
        "judges": [
            {  # answers: the expanded model, api_base and key are what the call used
                "name": "planted",
                "model": "openai/balanced@${JURY_TEST_PLANTED_TAG}",
                "api_base": with_token,
                "api_key_env": "${JURY_TEST_PLANTED_KEY_NAME}",
                "n": 2,
            },
            {  # the provider's 404 repeats the model name it was sent
                "name": "unknown-model",
                "model": "openai/nosuch-${JURY_TEST_PLANTED_TAG}",
                "api_base": simulator.url,
                "n": 1,
            },
            {  # a connection error may repeat the URL
                "name": "unreachable",
                "model": "openai/balanced",
                "api_base": unreachable,
                "timeout_s": 2,
                "n": 1,
            },
        ],
        "dimensions": ["relevance"],
        "items": [{"id": f"q{n}", "output": f"Answer {n}."} for n in range(3)],
    }
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_planted_placeholder_values_leak_nowhere(
    tmp_path: Path,
    flower: tuple[Flower, Settings],  # noqa: F811
    simulator: ManagedProcess,
    start_workers: WorkerStarter,
) -> None:
    server, settings = flower
    key_name = f"JURY_TEST_PLANTED_KEY_{secrets.token_hex(4).upper()}"
    planted = {
        "JURY_TEST_PLANTED_BASE": f"sk-base-{secrets.token_hex(12)}",
        "JURY_TEST_PLANTED_TAG": f"tag{secrets.token_hex(8)}",
        "JURY_TEST_PLANTED_KEY_NAME": key_name,
        key_name: f"sk-key-{secrets.token_hex(12)}",
    }
    # The egress policy lets the planted values go to the simulator, on loopback, as an
    # operator lists them (docs/limits-and-security.md); they would go nowhere else.
    listed = ("JURY_TEST_PLANTED_BASE", "JURY_TEST_PLANTED_TAG", key_name)
    key_hosts = {**settings.key_hosts, **{name: ["loopback"] for name in listed}}
    settings = settings.model_copy(update={"key_hosts": key_hosts})
    [worker] = start_workers(settings, **planted)
    watched_by_flower(server, settings, worker)

    env = {**worker_env(settings), **planted}  # the producer checks placeholders where it runs
    batch = planted_batch(tmp_path, simulator)
    submitted = jury(["submit", str(batch), "--wait", "--timeout", "120"], env, tmp_path)
    batch_id = submitted.stdout.strip().splitlines()[-1]
    outputs = {"submit": submitted.stdout + submitted.stderr}
    for fmt in ("json", "jsonl", "csv", "table"):
        done = jury(["results", batch_id, "--format", fmt], env, tmp_path)
        assert done.returncode == 0, done.stderr
        outputs[f"results {fmt}"] = done.stdout
    outputs["status"] = jury(["status", batch_id, "--json"], env, tmp_path).stdout
    report = tmp_path / "report.html"
    assert jury(["report", batch_id, "-o", str(report)], env, tmp_path).returncode == 0
    outputs["report"] = report.read_text()
    # The planted judge answered through its expanded settings; the others failed.
    record = json.loads(outputs["results json"])["results"][0]
    evaluations = record["llm_evaluations"]
    assert len(evaluations["planted"]["samples"]) == 2
    assert evaluations["unknown-model"]["n_failed"] == evaluations["unreachable"]["n_failed"] == 1

    wait_for(
        lambda: server.answers("/api/tasks?taskname=jury.judge_sample&limit=100", batch_id),
        60,
        "Flower to list the batch's tasks",
    )
    database = b"".join(p.read_bytes() for p in tmp_path.glob("jury.db*"))
    places = {
        "database": database,
        "redis": redis_dump(settings.broker_url),
        "worker log": worker.log_path.read_bytes() if worker.log_path else b"",
        "flower tasks": server.get("/api/tasks?limit=1000")[1].encode(),
        **{f"jury {name}": text.encode() for name, text in outputs.items()},
    }
    assert b"${JURY_TEST_PLANTED_BASE}" in database  # stored as written
    for where, content in places.items():
        assert content, f"nothing to search in the {where}"
        for name, value in planted.items():
            if name != "JURY_TEST_PLANTED_KEY_NAME":  # a variable's name is no secret
                assert value.encode() not in content, f"{name}'s value leaked into the {where}"
