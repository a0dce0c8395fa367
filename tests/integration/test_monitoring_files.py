"""What jury ships for monitoring (deploy/prometheus, deploy/grafana, docs/monitoring.md):
the rules pass `promtool check rules` and their unit tests (`promtool test rules`), the
scrape configuration `promtool check config`; every metric they, the dashboard and the docs
name is one jury serves, and every one jury serves is documented; the dashboard has a panel
per question an operator asks.

promtool comes with Debian's prometheus package: skipped where it is missing, except in CI
(CI=true), where it fails: .ci/run installs it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from prometheus_client import CollectorRegistry

from jury.broker.budget import MeterReading
from jury.broker.census import Census
from jury.errors import TransientJudgeError
from jury.schemas.batch import Judge
from jury.worker.metrics.fleet import FleetReading, families, read_ok
from jury.worker.metrics.recording import WorkerMetrics
from tests.conftest import IN_CI, ROOT
from tests.unit.worker.test_metrics_recording import Reply

PROMETHEUS = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "jury.json"
DOCS = ROOT / "docs" / "monitoring.md"
# A metric's name where a rule, a query or the docs spell it (recording rules' are jury:…;
# a family written `jury_calls_*` is none).
METRIC = re.compile(r"\bjury_[a-z0-9_]*[a-z0-9]\b(?!\*)")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        message = (
            "no promtool: Debian's prometheus package is not installed (apt-get install prometheus)"
        )
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return subprocess.run(
        [binary, *args], cwd=PROMETHEUS, capture_output=True, text=True, timeout=120
    )


def served_names() -> dict[str, str]:
    """Every sample name jury serves -> its metric family's help text."""
    registry = CollectorRegistry()
    WorkerMetrics(registry)
    found: dict[str, str] = {}
    for family in registry.collect():
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
        for suffix in suffixes.get(family.type, [""]):
            found[family.name + suffix] = family.documentation
    for family in [*families(FleetReading(Census({}, 0))), read_ok(True)]:
        found[family.name] = family.documentation
    return found


def test_the_rules_pass_promtool() -> None:
    checked = promtool("check", "rules", "rules.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


def test_the_alerts_fire_when_they_should_and_only_then() -> None:
    tested = promtool("test", "rules", "rules_test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # Each alert of rules.yml is unit-tested.
    alerts = set(re.findall(r"^\s+- alert: (\w+)", (PROMETHEUS / "rules.yml").read_text(), re.M))
    tested_names = set(re.findall(r"alertname: (\w+)", (PROMETHEUS / "rules_test.yml").read_text()))
    assert len(alerts) >= 5 and alerts == tested_names


def test_the_scrape_configuration_passes_promtool() -> None:
    checked = promtool("check", "config", "prometheus.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_metric_named_is_served_and_every_one_served_is_documented() -> None:
    served = served_names()
    docs = DOCS.read_text()
    texts = {
        path.relative_to(ROOT).as_posix(): path.read_text()
        for path in [PROMETHEUS / "rules.yml", PROMETHEUS / "rules_test.yml", DASHBOARD, DOCS]
    }
    families = {re.sub(r"_(total|bucket|sum|count)$", "", name) for name in served}
    for where, text in texts.items():
        unknown = set(METRIC.findall(text)) - set(served) - families
        assert not unknown, f"{where} names metrics jury does not serve: {sorted(unknown)}"
    undocumented = {name for name in families if f"`{name}" not in docs}
    assert not undocumented, f"docs/monitoring.md does not describe {sorted(undocumented)}"


def test_the_dashboard_answers_each_question() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    titles = " | ".join(p["title"].lower() for p in panels)
    questions = [
        "quota used",
        "429",
        "slot wait",
        "latency",
        "tokens",
        "cost",
        "budget",
        "in flight per worker",
        "tasks by state",
        "tasks by queue",
        "parked",
        "workers alive",
        "queued again",
        "verdicts",
        "providers' batches",
    ]
    assert [q for q in questions if q not in titles] == []
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"] and all(t["expr"].strip() for t in panel["targets"])
        assert panel["description"], f"{panel['title']}: say what it shows"
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert variables == {"datasource", "model"}


def test_no_label_names_an_item_a_sample_or_a_task() -> None:
    """Labels stay bounded: model, outcome, kind, reason, limit, queue, state; a batch only on
    the running batches' budget gauges."""
    registry = CollectorRegistry()
    series = WorkerMetrics(registry).model("openai/x")
    series.set_limits(Judge(model="openai/x", rpm=60))
    series.parked("slot")
    series.failed(TransientJudgeError("slow", kind="timeout"))
    series.answered(Reply())
    worker = {name for f in registry.collect() for s in f.samples for name in s.labels}
    assert worker - {"le"} == {"model", "outcome", "kind", "reason", "limit"}
    reading = FleetReading(
        Census({("jury", "queued"): 1}, 1), budgets={"b1": MeterReading(0.5, 0.1, 1.0)}
    )
    fleet = {name for f in families(reading) for s in f.samples for name in s.labels}
    assert fleet == {"queue", "state", "batch"}
