"""A small batch through real `jury worker` processes against a real local model server
(llama-cpp-python with SmolLM2-135M-Instruct): two judges share the one server with
`max_in_flight: 1`, as a user with one Ollama or vLLM box would set them. Every sample must
be judged or fail for a reason of the model's own; a sample that only waited for the slow
server must never be stored as failed (issue 11, item 5)."""

from __future__ import annotations

import json
import secrets
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from rich.console import Console

from jury.batchfile.loading import load_batch
from jury.local.services import ManagedProcess
from jury.producer.following import follow_batch
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.schemas.status import BatchState
from jury.schemas.tasks import CellRef
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.samples import list_samples
from tests.conftest import WorkerStarter

pytestmark = pytest.mark.integration

ITEMS = [
    {"id": "refund", "input": "How do I get a refund for a duplicate charge?",
     "output": "Open Billing > History, pick the duplicate and press Refund; it reaches your "
     "card in 3-5 business days."},
    {"id": "refund-rude", "input": "How do I get a refund for a duplicate charge?",
     "output": "Refunds are not something we discuss."},
    {"id": "password", "input": "I forgot my password.",
     "output": "Use 'Forgot password' on the sign-in page and follow the link we email you."},
    {"id": "export", "input": "Can I export my data?",
     "output": "Yes: Settings > Privacy > Export builds a ZIP and emails you a link."},
]  # fmt: skip
DIMENSIONS = ["relevance", "helpfulness"]
JUDGES = {"smol-hot": 0.8, "smol-cold": 0.2}
# 48 samples: one at a time they keep the server busy for about 5 minutes on a quiet machine,
# well past the 120 s that the current engine lets a task wait for a slot (issue 11).
SAMPLES_PER_JUDGE = 3
# What a 135M model may get wrong by itself: no score in its answer, or one off the scale.
MODEL_OWN_FAILURES = {"unparseable", "out_of_scale"}
# 48+ calls one at a time on a shared 2-core machine: seconds each, minutes in all.
BATCH_DEADLINE_S = 1200


def write_batch(folder: Path, server_url: str) -> Path:
    judges = [
        {
            "model": "openai/smollm2",
            "name": name,
            "api_base": server_url,
            "n": SAMPLES_PER_JUDGE,
            "temperature": temperature,
            "max_in_flight": 1,
            "timeout_s": 120,
        }
        for name, temperature in JUDGES.items()
    ]
    (folder / "items.jsonl").write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    spec = {
        "name": "real-model",
        "judges": judges,
        "dimensions": DIMENSIONS,
        "items": "items.jsonl",
    }
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_every_sample_judged_or_failed_by_the_model(
    tmp_path: Path, redis_url: str, llama_server: ManagedProcess, start_workers: WorkerStarter
) -> None:
    # Default settings but for the queue, the database and the server's address allowed
    # (docs/limits-and-security.md): what a user's worker runs with.
    settings = Settings(
        broker_url=redis_url,
        database_url=f"sqlite:///{tmp_path / 'jury.db'}",
        queue=f"jury-real-{secrets.token_hex(4)}",
        egress_allow=urlsplit(llama_server.url).netloc,
    )
    start_workers(settings, count=2)
    sessions = session_factory(settings.database_url)
    started = time.monotonic()
    batch_id = submit_batch(
        load_batch(write_batch(tmp_path, llama_server.url), egress=settings.egress_policy()),
        sessions,
        create_producer_app(settings),
    )
    status = follow_batch(sessions, batch_id, Console(quiet=True), timeout=BATCH_DEADLINE_S)
    wall_s = time.monotonic() - started
    assert status is not None, f"batch {batch_id} did not finish in {BATCH_DEADLINE_S} s"
    # Degraded is the model's doing (a judge without a score on a cell), checked below.
    assert status.status in (BatchState.COMPLETED, BatchState.DEGRADED), status

    samples = [
        sample
        for item in ITEMS
        for dimension in DIMENSIONS
        for sample in list_samples(sessions, CellRef(batch_id, item["id"], dimension))
    ]
    judged = [s for s in samples if s.ok]
    failures = Counter(s.error_kind for s in samples if not s.ok)
    print(
        f"real model: {len(samples)} samples in {wall_s:.0f} s, {len(judged)} judged, "
        f"failed: {dict(failures) or 'none'}; "
        f"errors: {sorted({(s.error or '')[:90] for s in samples if not s.ok})[:5]}"
    )
    assert len(samples) == len(ITEMS) * len(DIMENSIONS) * len(JUDGES) * SAMPLES_PER_JUDGE
    assert judged, "the real model scored nothing: the server was never really asked"
    assert all(s.latency_ms > 0 for s in judged)
    waited = {kind: n for kind, n in failures.items() if kind not in MODEL_OWN_FAILURES}
    assert not waited, f"samples failed for waiting, not for the model's answers: {waited}"
