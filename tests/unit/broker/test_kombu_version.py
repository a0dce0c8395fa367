"""jury's transport overrides private methods of kombu's Redis transport: it runs only on the
kombu minor versions it was read against, and the package allows no other."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import kombu

from jury.broker.transport import KOMBU_READ_AGAINST

ROOT = Path(__file__).resolve().parents[3]


def minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def test_installed_kombu_is_one_the_transport_was_read_against() -> None:
    assert minor(kombu.__version__) in KOMBU_READ_AGAINST, (
        f"kombu {kombu.__version__}: read jury/broker/transport.py's overrides against it, "
        "then add its minor version to KOMBU_READ_AGAINST and pyproject.toml"
    )


def test_pyproject_allows_only_those_minor_versions() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    [spec] = [d for d in project["dependencies"] if re.match(r"kombu\b", d)]
    low = re.search(r">=\s*([\d.]+)", spec)
    high = re.search(r"<\s*([\d.]+)", spec)
    assert low and high, spec
    first = tuple(int(x) for x in minor(low.group(1)).split("."))
    end = tuple(int(x) for x in minor(high.group(1)).split("."))
    allowed = {f"{first[0]}.{m}" for m in range(first[1], end[1])} if first[0] == end[0] else set()
    assert allowed and allowed <= set(KOMBU_READ_AGAINST), spec
