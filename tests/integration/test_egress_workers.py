"""The workers' egress policy against a batch that asks for what they hold (issue 30): real
workers, real Redis, servers on loopback that record every request. The batch is stored
with a submitter's lax policy (the producer's check is a courtesy): the workers decide."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from rich.console import Console

from jury.batchfile.loading import load_batch
from jury.producer.following import follow_batch
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.schemas.egress import EgressPolicy
from jury.schemas.results import SampleResult
from jury.schemas.tasks import CellRef
from jury.store.engine import session_factory
from jury.store.generations import generations
from jury.store.samples import list_samples
from tests.conftest import WorkerStarter, settings_for
from tests.integration.test_egress_clients import (
    NAMED_KEY,
    OPENAI_KEY,
    Recorder,
    gzip_bomb,
    serve,
)

pytestmark = pytest.mark.integration
ALLOWED_KEY = "sk-allowed-egress-test-5555555555"
TOKEN = "internal-token-7777777777"
# What a submitter's own settings could say (or what a forged batch would carry): anything.
LAX = EgressPolicy.build(
    allow="*",
    key_hosts={name: ["*"] for name in ("JURY_TEST_EGRESS_KEY", "JURY_TEST_ALLOWED_KEY", "HOME")},
    plain_vars="INTERNAL_TOKEN",
)


def peak_rss_mib(pid: int) -> float:
    """The most memory the process has held at once (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def write(folder: Path, name: str, spec: dict[str, object]) -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_batch_gets_no_byte_of_a_key_nor_a_reach_the_workers_do_not_allow(
    tmp_path: Path, redis_url: str, start_workers: WorkerStarter, monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed, internal = Recorder(), Recorder()
    servers = [serve(internal), serve(allowed)]
    allowed.redirect_to = internal.port
    here = f"127.0.0.1:{allowed.port}"
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}").model_copy(
        update={
            "egress_allow": here,  # the internal service is not allowed
            "key_hosts": {
                "JURY_TEST_EGRESS_KEY": ["api.example.com"],
                "JURY_TEST_ALLOWED_KEY": [here],
            },
            "max_attempts": 2,
            "batch_api_window_s": 0.2,
        }
    )
    keys = {
        "OPENAI_API_KEY": OPENAI_KEY,
        "JURY_TEST_EGRESS_KEY": NAMED_KEY,
        "JURY_TEST_ALLOWED_KEY": ALLOWED_KEY,
        "INTERNAL_TOKEN": TOKEN,
    }
    for name, value in keys.items():
        monkeypatch.setenv(name, value)  # the producer expands placeholders too
    gzip_bomb()
    [worker] = start_workers(settings, **keys)
    peak_before = peak_rss_mib(worker.process.pid)

    base = allowed.url()
    judges: dict[str, dict[str, object]] = {
        "open": {"api_base": base},  # OPENAI_API_KEY stays home: a placeholder goes
        "named": {"api_base": base, "api_key_env": "JURY_TEST_EGRESS_KEY"},
        "home": {"api_base": base, "api_key_env": "HOME"},
        "internal": {"api_base": internal.url()},
        "redirected": {
            "api_base": allowed.url("/redirect/v1"),
            "api_key_env": "JURY_TEST_ALLOWED_KEY",
            "http_client": "litellm",
        },
        "bomb": {"api_base": allowed.url("/bomb/v1"), "http_client": "litellm"},
        "batched": {"api_base": base, "api_key_env": "JURY_TEST_EGRESS_KEY", "batch_api": True},
    }
    spec = {
        "judges": [{"model": "openai/x", "name": n, "n": 1, **j} for n, j in judges.items()],
        "dimensions": ["relevance"],
        "items": [{"id": "a", "output": "x"}],
        "cache": False,
    }
    probe = {  # two HTTP candidates, compared: each one's answer is its refusal
        "candidates": [
            {"name": "internal", "url": internal.url("/secret")},
            {
                "name": "token",
                "url": allowed.url("/answer"),
                "headers": {"Authorization": "Bearer ${INTERNAL_TOKEN}"},
            },
        ],
        "judges": [{"model": "openai/x", "name": "open", "n": 1, "api_base": base}],
        "dimensions": ["relevance"],
        "items": [{"id": "b", "input": "What is the secret?"}],
    }
    sessions = session_factory(settings.database_url)
    app = create_producer_app(settings)
    batch_ids = [
        submit_batch(load_batch(write(tmp_path, name, doc), egress=LAX), sessions, app)
        for name, doc in (("keys.yaml", spec), ("probe.yaml", probe))
    ]
    for batch_id in batch_ids:
        assert follow_batch(sessions, batch_id, Console(quiet=True), timeout=90) is not None
    try:
        found = list_samples(sessions, CellRef(batch_ids[0], "a", "relevance"))
        samples: dict[str, SampleResult] = {s.judge: s for s in found}
        assert set(samples) == set(judges)
        assert samples["open"].score == 4.0
        for name in ("named", "home", "internal", "redirected", "batched"):
            sample = samples[name]
            assert sample.error_kind == "egress_refused", (name, sample)
            assert sample.attempts <= 1, (name, sample)  # never retried
            assert "refused by the workers' egress policy" in (sample.error or "")
        assert "JURY_KEY_HOSTS" in (samples["named"].error or "")
        assert "HOME is not a key variable" in (samples["home"].error or "")
        assert f"JURY_EGRESS_ALLOW=127.0.0.1:{internal.port}" in (samples["internal"].error or "")
        assert "redirect (HTTP 307)" in (samples["redirected"].error or "")
        assert "larger than 8 MiB" in (samples["bomb"].error or "")
        answers = {g.candidate: g for _, g in generations(sessions, batch_ids[1])}
        assert {g.error_kind for g in answers.values()} == {"egress_refused"}
        assert f"JURY_EGRESS_ALLOW=127.0.0.1:{internal.port}" in answers["internal"].text
        assert "${INTERNAL_TOKEN}" in answers["token"].text
        assert "JURY_PLAIN_VARS" in answers["token"].text

        # Not a byte of a key where it may not go; the internal service never reached.
        assert not allowed.carried(OPENAI_KEY, NAMED_KEY, TOKEN)
        assert allowed.carried(ALLOWED_KEY)  # listed for it: the control
        assert not any("/files" in h["path"] for h in allowed.seen)  # no Batch API upload
        assert internal.seen == []
        # The bomb (200 MiB inflated, twice) was read up to 8 MiB each time.
        assert peak_rss_mib(worker.process.pid) < peak_before + 64
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
