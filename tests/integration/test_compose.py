"""docker-compose.yml and the Dockerfile, checked without a Docker engine: every command they
run exists in the project and parses, every variable they need is documented, and the
operational promises hold (Redis AOF and password, workers that scale and stop warm, Flower
behind a login, a one-shot producer)."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from celery import Celery
from celery.bin.base import CLIContext
from celery.bin.worker import worker as celery_worker

from jury.cli.main import jury
from jury.local.flower import check_flower_options
from jury.settings import Settings
from jury.simulator.config import build_parser

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
OURS = [name for name, service in SERVICES.items() if "build" in service]
# The longest a judge call may last by default (schemas.batch.Judge.timeout_s).
JUDGE_TIMEOUT_S = 60
_VARIABLE = re.compile(
    r"\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?+])?(?P<arg>[^}]*)\}"
    r"|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
)


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's interpolation: ${VAR}, ${VAR:-default}, ${VAR:?error}, $VAR; $$ is a $."""

    def one(match: re.Match[str]) -> str:
        name = match["braced"] or match["bare"]
        value, op = env.get(name), match["op"] or ""
        if op.startswith(":") and value == "":
            value = None
        if value is not None:
            return value
        if op.endswith("?"):
            raise KeyError(f"{name} is required: {match['arg']}")
        return match["arg"] if op.endswith("-") else ""

    return "$".join(_VARIABLE.sub(one, part) for part in text.split("$$"))


def strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for key, value in node.items() for s in strings(key) + strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in strings(value)]
    return []


def variables_needed() -> set[str]:
    """Interpolated variables, and provider keys passed through from the shell (no value)."""
    names = {
        m["braced"] or m["bare"]
        for text in strings(COMPOSE)
        for part in text.split("$$")
        for m in _VARIABLE.finditer(part)
    }
    for service in SERVICES.values():
        environment = service.get("environment") or {}
        names |= {name for name, value in environment.items() if value is None}
    return names


def example_env() -> dict[str, str]:
    env = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        name, sep, value = line.lstrip("#").partition("=")
        if sep and not line.startswith("#"):
            env[name.strip()] = value.strip()
    return env


def docs_page(name: str) -> str:
    return (ROOT / "docs" / name).read_text()


def as_argv(command: str | list[str]) -> list[str]:
    return command if isinstance(command, list) else shlex.split(command)


def check_jury_command(argv: list[str]) -> None:
    """The command parses exactly as the container would run it: our console script, one of
    its subcommands, and options that subcommand (or what it passes them to) accepts."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert argv[0] in scripts, f"{argv[0]} is not a console script of the project"
    group = jury
    assert isinstance(group, click.Group)
    name, args = argv[1], argv[2:]
    command = group.get_command(click.Context(group), name)
    assert command is not None, f"`jury {name}` does not exist"
    if name == "worker":
        assert args[0] == "--", "celery worker options go after `--`"
        obj = CLIContext(app=Celery(set_as_current=False), no_color=True, workdir=None)
        celery_worker.make_context("worker", args[1:], obj=obj)
    elif name == "simulate":
        build_parser().parse_args(args)
    else:
        context = command.make_context(name, list(args))
        if name == "flower":
            check_flower_options(context.params["flower_options"])
    for arg in args:
        if arg.endswith((".yaml", ".yml", ".json", ".jsonl")):
            assert (ROOT / arg).is_file(), f"{arg} is not in the project"


@pytest.mark.parametrize("service", OURS)
def test_every_command_exists_and_parses(service: str) -> None:
    command = SERVICES[service]["command"]
    assert isinstance(command, list), f"{service}: exec form, so SIGTERM reaches the process"
    check_jury_command(command)


def test_every_variable_is_documented() -> None:
    needed = variables_needed()
    assert {"REDIS_PASSWORD", "POSTGRES_PASSWORD", "FLOWER_BASIC_AUTH"} <= needed
    documented = docs_page("docker.md")
    example = (ROOT / ".env.example").read_text()
    for name in sorted(needed):
        assert f"`{name}`" in documented, f"{name} is not described in docs/docker.md"
        assert name in example, f"{name} is not in .env.example"


def test_services_get_valid_settings_from_the_example_env() -> None:
    """With .env.example's values, every jury service's JURY_* variables are settings jury
    knows and accepts, and point at the compose services."""
    env = example_env()
    known = set(Settings().to_env()) | {"JURY_SIMULATOR_URL"}
    for name in OURS:
        environment = {
            key: interpolate(str(value), env)
            for key, value in (SERVICES[name].get("environment") or {}).items()
            if value is not None
        }
        unknown = {k for k in environment if k.startswith("JURY_")} - known
        assert not unknown, f"{name}: unknown variables {unknown}"
        settings = Settings.from_env(environment)
        assert settings.broker_url == f"redis://:{env['REDIS_PASSWORD']}@redis:6379/0"
        assert settings.database_url.startswith("postgresql://jury:")
        assert "@postgres:5432/" in settings.database_url
    with pytest.raises(KeyError, match="REDIS_PASSWORD"):
        interpolate(str(SERVICES["worker"]["environment"]["JURY_BROKER_URL"]), {})


def test_redis_keeps_tasks_and_wants_a_password() -> None:
    redis = SERVICES["redis"]
    argv = [interpolate(a, example_env()) for a in as_argv(redis["command"])]
    assert argv[argv.index("--appendonly") + 1] == "yes"
    assert argv[argv.index("--requirepass") + 1] == example_env()["REDIS_PASSWORD"]
    assert any(v.endswith(":/data") for v in redis["volumes"]), "the AOF file needs a volume"
    assert "redis-data" in COMPOSE["volumes"] and "postgres-data" in COMPOSE["volumes"]


def _seconds(duration: str) -> float:
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(float(n) * units[u] for n, u in parts)


def test_workers_scale_and_stop_warm() -> None:
    worker = SERVICES["worker"]
    assert "container_name" not in worker and "hostname" not in worker
    assert "ports" not in worker, "a published port cannot be shared by replicas"
    argv = worker["command"]
    node = argv[argv.index("--hostname") + 1]
    assert "%h" in node, "node names must differ per replica (the container hostname)"
    assert worker.get("init") is True and worker.get("stop_signal", "SIGTERM") == "SIGTERM"
    assert _seconds(worker["stop_grace_period"]) > JUDGE_TIMEOUT_S
    assert {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"} <= set(worker["environment"])


def test_flower_needs_a_login_and_the_producer_runs_once() -> None:
    flower = SERVICES["flower"]
    assert "${FLOWER_BASIC_AUTH:?" in flower["environment"]["FLOWER_BASIC_AUTH"]
    assert flower["command"][:2] == ["jury", "flower"] and "0.0.0.0" in flower["command"]
    producer = SERVICES["producer"]
    assert producer["restart"] == "no"
    assert producer["command"][:3] == ["jury", "submit", "jury/examples/demo.yaml"]
    assert "--wait" in producer["command"]
    assert producer["environment"]["JURY_SIMULATOR_URL"].startswith("http://simulator:")
    for name, service in SERVICES.items():
        depends = service.get("depends_on") or {}
        assert set(depends) <= set(SERVICES), f"{name} depends on an unknown service"


def test_dockerfile_copies_what_the_image_needs() -> None:
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    copied = set()
    for line in lines:
        if line.startswith("COPY "):
            *sources, _target = line.split()[1:]
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: not in the project"
                copied.add(source)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {p for p in include if "*" not in p}
    assert packages == {"jury"}, "one import name"
    assert packages <= copied, "every package of the project is in the image"
    assert {"requirements.lock", "pyproject.toml"} <= copied
    assert any(line.startswith("USER ") and "root" not in line for line in lines)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".env", ".git", ".venv"} <= set(ignored), "no secrets or local state in the image"


def _mounts(service: dict[str, Any]) -> dict[str, Path]:
    """A service's bind mounts: container path -> the project's folder or file."""
    found = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith("./"):
            found[target] = ROOT / source
    return found


def test_prometheus_scrapes_every_worker_and_the_exporter() -> None:
    """Compose's Prometheus finds each worker replica by the service's name on the port the
    workers serve their metrics on, and the exporter on the port it listens on; it loads
    jury's rules; it and Grafana are published on loopback only."""
    worker, exporter, prometheus = SERVICES["worker"], SERVICES["exporter"], SERVICES["prometheus"]
    settings = Settings.from_env(
        {k: interpolate(str(v), example_env()) for k, v in worker["environment"].items() if v}
    )
    assert settings.metrics_address == "0.0.0.0" and len(settings.metrics_ports) == 1
    worker_port = settings.metrics_ports[0]
    assert str(worker_port) in worker["expose"] and "ports" not in worker
    command = exporter["command"]
    exporter_port = command[command.index("--port") + 1]
    assert command[command.index("--address") + 1] == "0.0.0.0"
    assert exporter_port in exporter["expose"]

    folder = _mounts(prometheus)["/etc/prometheus"]
    config = yaml.safe_load((folder / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    [discovery] = jobs["jury-workers"]["dns_sd_configs"]
    assert discovery["names"] == ["worker"] and discovery["port"] == worker_port
    [static] = jobs["jury-exporter"]["static_configs"]
    assert static["targets"] == [f"exporter:{exporter_port}"]
    assert all((folder / name).is_file() for name in config["rule_files"])
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    for name in ("prometheus", "grafana"):
        image = SERVICES[name]["image"]
        assert ":" in image and not image.endswith(":latest"), f"{name}: pin its image"
        for published in SERVICES[name]["ports"]:
            assert published.startswith("127.0.0.1:"), f"{name} has no login: loopback only"


def test_grafana_loads_jury_s_dashboard_from_compose_s_prometheus() -> None:
    grafana = SERVICES["grafana"]
    mounts = _mounts(grafana)
    provisioning = mounts["/etc/grafana/provisioning"]
    [provider] = yaml.safe_load((provisioning / "dashboards" / "jury.yml").read_text())["providers"]
    dashboards = mounts[provider["options"]["path"]]
    assert (dashboards / "jury.json").is_file()
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/jury.json"
    [source] = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())[
        "datasources"
    ]
    assert source["url"] == "http://prometheus:9090" and source["type"] == "prometheus"
    assert "${GRAFANA_ADMIN_PASSWORD:?" in grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD"]
