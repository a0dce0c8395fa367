"""A real Prometheus (Debian's `prometheus`) scrapes a real worker and `jury exporter` with
jury's own scrape configuration and rules (deploy/prometheus/), every second, while a batch
runs against the simulator with one model limited so that some of its calls are answered
429. Read back through Prometheus' HTTP API, the calls, 429s, tokens and cost are exactly
what the simulator and the store counted; the rules load and evaluate; every query of the
Grafana dashboard runs.

Skipped where the prometheus binary is missing, except in CI (CI=true), where it fails:
.ci/run installs it. `make test-metrics` runs it (kept out of `make test` for its time)."""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from sqlalchemy import func, select

from bench.common import simulator_stats
from jury.batchfile.loading import load_batch
from jury.local.services import ManagedProcess, free_port, start_simulator, wait_for
from jury.producer.following import follow_batch
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.schemas.status import BatchState
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.models import SampleRow, VerdictRow
from tests.conftest import IN_CI, ROOT, WorkerStarter, settings_for, worker_env

pytestmark = [pytest.mark.integration, pytest.mark.prometheus]
DEPLOY = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "jury.json"
JURY = [sys.executable, "-c", "from jury.cli.main import main; main()"]
ITEMS = 12
# The limited model's quota at the simulator: 2 calls a second (120 a minute, counted over a
# one-second window); the batch gives jury no rpm for it, so its first calls meet 429s.
TIGHT_RPM = 120
PRICES = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        message = (
            "no prometheus binary: Debian's prometheus package is not installed "
            "(apt-get install prometheus; .ci/run installs it)"
        )
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return found


def scrape_config(workers: list[str], exporter: str) -> dict[str, Any]:
    """jury's own configuration (deploy/prometheus/prometheus.yml), its jobs and rules as
    shipped, with the test's targets in place of compose's service discovery and a scrape
    every second."""
    shipped = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    config = copy.deepcopy(shipped)
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    config["rule_files"] = [str(DEPLOY / name) for name in shipped["rule_files"]]
    targets = {"jury-workers": workers, "jury-exporter": [exporter]}
    for job in config["scrape_configs"]:
        for key in [k for k in job if k.endswith("_sd_configs") or k == "static_configs"]:
            del job[key]
        job["static_configs"] = [{"targets": targets[job["job_name"]]}]
    assert set(targets) == {job["job_name"] for job in config["scrape_configs"]}
    return config


class Prometheus:
    def __init__(self, folder: Path, config: dict[str, Any], logs_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        path = folder / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        self.log = logs_dir / f"prometheus-{self.port}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    prometheus_binary(),
                    f"--config.file={path}",
                    f"--storage.tsdb.path={folder / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_for(self.ready, 60, "Prometheus to be ready", poll=0.2)

    def ready(self) -> bool:
        assert self.process.poll() is None, self.log.read_text()[-3000:]
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, promql: str) -> dict[tuple[tuple[str, str], ...], float]:
        """An instant query: each series' labels (sorted, without __name__) -> its value."""
        data = self.api("query", query=promql)
        return {
            tuple(sorted((k, v) for k, v in r["metric"].items() if k != "__name__")): float(
                r["value"][1]
            )
            for r in data["result"]
        }

    def one(self, promql: str) -> float | None:
        found = self.query(promql)
        assert len(found) <= 1, found
        return next(iter(found.values()), None)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


@pytest.fixture
def limited_simulator(logs_dir: Path) -> Iterator[tuple[ManagedProcess, str]]:
    tag = secrets.token_hex(3)
    tight = f"balanced@{tag}tight"
    options = ["--seed", "5", "--model-rpm", f"{tight}={TIGHT_RPM}", "--rate-window", "1"]
    simulator = start_simulator(logs_dir, options)
    yield simulator, tag
    simulator.stop()


def write_batch(folder: Path, simulator: ManagedProcess, tag: str) -> Path:
    judges = [
        {"model": f"openai/balanced@{tag}free", "api_base": simulator.url, **PRICES},
        {"model": f"openai/balanced@{tag}tight", "api_base": simulator.url, **PRICES},
    ]
    items = [
        {"id": f"i{n}", "input": f"Question {n}?", "output": f"Answer {n}."} for n in range(ITEMS)
    ]
    (folder / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    spec = {
        "name": "metrics",
        "judges": judges,
        "dimensions": ["relevance"],
        "items": "items.jsonl",
        "max_cost_usd": 100,
    }
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def start_exporter(settings: Settings, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*JURY, "exporter", "--port", str(port)],
        env=worker_env(settings),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stored_totals(settings: Settings, batch_id: str) -> dict[str, float]:
    sessions = session_factory(settings.database_url)
    with sessions() as session:
        prompt, completion, cost, samples = session.execute(
            select(
                func.sum(SampleRow.prompt_tokens),
                func.sum(SampleRow.completion_tokens),
                func.sum(SampleRow.cost_usd),
                func.count(),
            ).where(SampleRow.batch_id == batch_id)
        ).one()
        verdicts = session.scalar(
            select(func.count()).select_from(VerdictRow).where(VerdictRow.batch_id == batch_id)
        )
    return {
        "prompt": float(prompt),
        "completion": float(completion),
        "cost": float(cost),
        "samples": float(samples),
        "verdicts": float(verdicts or 0),
    }


def dashboard_queries() -> list[str]:
    """Every query of the Grafana dashboard, its variables as Grafana fills them in."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    fill = {"$__rate_interval": "15s", "$__range": "5m", "$model": ".*"}
    return [re.sub(r"\$\w+", lambda m: fill[m.group(0)], q) for q in queries]


def test_prometheus_sees_what_the_simulator_and_the_store_counted(
    redis_url: str,
    tmp_path: Path,
    logs_dir: Path,
    start_workers: WorkerStarter,
    limited_simulator: tuple[ManagedProcess, str],
) -> None:
    prometheus_binary()  # skip (or fail in CI) before starting anything
    simulator, tag = limited_simulator
    worker_port, exporter_port = free_port(), free_port()
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}").model_copy(
        update={"metrics_port": str(worker_port)}
    )
    start_workers(settings)
    exporter = start_exporter(settings, exporter_port)
    config = scrape_config([f"127.0.0.1:{worker_port}"], f"127.0.0.1:{exporter_port}")
    prometheus = Prometheus(tmp_path, config, logs_dir)
    try:

        def both_up() -> bool:
            up = prometheus.query("up")
            return len(up) == 2 and min(up.values()) == 1

        wait_for(both_up, 60, "Prometheus to scrape the worker and the exporter", poll=0.3)
        up = prometheus.query("up")
        assert {dict(labels)["job"] for labels in up} == {"jury-workers", "jury-exporter"}

        sessions = session_factory(settings.database_url)
        batch = load_batch(write_batch(tmp_path, simulator, tag))
        batch_id = submit_batch(batch, sessions, create_producer_app(settings))
        status = follow_batch(sessions, batch_id, Console(quiet=True), timeout=120)
        assert status is not None and status.status in (BatchState.COMPLETED, BatchState.DEGRADED)

        stored = stored_totals(settings, batch_id)
        counted = simulator_stats(simulator)["models"]
        free, tight = f"balanced@{tag}free", f"balanced@{tag}tight"
        assert counted[tight]["429"] > 0, "the limited model was never answered 429"
        sent = {m: sum(v for k, v in counted[m].items() if k.isdigit()) for m in (free, tight)}

        def calls(model: str, outcome: str = "") -> float | None:
            chosen = f',outcome="{outcome}"' if outcome else ""
            return prometheus.one(f'sum(jury_calls_total{{model="openai/{model}"{chosen}}})')

        # A scrape after the batch's end: wait until Prometheus has its last calls and verdicts.
        def scraped() -> dict[str, float | None]:
            return {
                "free": calls(free),
                "tight": calls(tight),
                "verdicts": prometheus.one("sum(jury_verdicts_stored_total)"),
            }

        expected = {"free": sent[free], "tight": sent[tight], "verdicts": stored["verdicts"]}
        try:
            wait_for(lambda: scraped() == expected, 30, "a scrape after the batch", poll=0.3)
        except Exception:
            pytest.fail(f"Prometheus has {scraped()}, the simulator and the store {expected}")
        assert calls(tight, "429") == counted[tight]["429"]
        assert calls(tight, "ok") == counted[tight]["200"]
        assert calls(free, "ok") == counted[free]["200"] == sent[free]
        assert calls(free, "429") == 0
        assert prometheus.one("sum(jury_call_prompt_tokens_total)") == stored["prompt"]
        assert prometheus.one("sum(jury_call_completion_tokens_total)") == stored["completion"]
        assert prometheus.one("sum(jury_call_cost_usd_total)") == pytest.approx(stored["cost"])
        assert stored["cost"] > 0
        assert stored["verdicts"] == ITEMS
        latency = prometheus.one(f'sum(jury_call_latency_seconds_count{{model="openai/{free}"}})')
        assert latency == sent[free]
        # The simulator's rate-limit headers: its quota, as the provider states it.
        limit = prometheus.one(f'max(jury_provider_requests_limit{{model="openai/{tight}"}})')
        assert limit == TIGHT_RPM

        # The exporter: nothing left anywhere, the worker alive; the batch's spend and budget
        # while it ran.
        wait_for(
            lambda: prometheus.one('sum(jury_tasks{job="jury-exporter"})') == 0,
            30,
            "the exporter to see the queues empty",
            poll=0.3,
        )
        assert prometheus.one("max(jury_workers_alive)") == 1
        budget = prometheus.one(f'max_over_time(jury_batch_budget_usd{{batch="{batch_id}"}}[5m])')
        assert budget == 100
        spent = prometheus.one(f'max_over_time(jury_batch_spent_usd{{batch="{batch_id}"}}[5m])')
        assert spent is not None and 0 < spent <= stored["cost"] + 1e-9

        # The rules load and evaluate on real series; the 429 share is there for the tight model.
        def rules_evaluated() -> bool:
            rules = [r for g in prometheus.api("rules")["groups"] for r in g["rules"]]
            assert all(r["health"] != "err" for r in rules), rules
            return len(rules) >= 10 and all(r["health"] == "ok" for r in rules)

        wait_for(rules_evaluated, 30, "the rules to be evaluated", poll=0.5)
        wait_for(
            lambda: (prometheus.one(f'jury:model_429:ratio5m{{model="openai/{tight}"}}') or 0) > 0,
            30,
            "the 429 share of the limited model",
            poll=0.5,
        )
        # Every query of the dashboard runs; those about calls find this run's.
        for query in dashboard_queries():
            prometheus.api("query", query=query)
        assert prometheus.query("sum by (outcome) (rate(jury_calls_total[1m])) * 60")

        if screenshot := os.environ.get("JURY_MONITORING_SCREENSHOT"):
            take_screenshot(prometheus, Path(screenshot), tight)
    finally:
        prometheus.stop()
        exporter.terminate()
        exporter.wait(15)


def take_screenshot(prometheus: Prometheus, path: Path, model: str) -> None:
    """Prometheus' graph of this run's calls per minute by model and outcome (the picture in
    docs/monitoring.md), written only when JURY_MONITORING_SCREENSHOT names a file. Debian's
    Prometheus serves its classic web UI (the graph page at /classic/graph)."""
    from tests.browser import chromium_driver

    query = "sum by (model, outcome) (rate(jury_calls_total[5s])) * 60 > 0"
    params = urllib.parse.urlencode({"g0.expr": query, "g0.tab": "0", "g0.range_input": "40s"})
    for driver in chromium_driver():
        driver.get(f"{prometheus.url}/classic/graph?{params}")

        def drawn(driver: Any = driver) -> bool:
            return bool(driver.find_elements("css selector", ".rickshaw_legend .line"))

        wait_for(drawn, 30, "the graph")
        driver.set_window_size(1280, 1000)  # the graph and its legend
        driver.save_screenshot(str(path))
