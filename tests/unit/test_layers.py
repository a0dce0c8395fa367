"""The tree is the architecture (docs/architecture.md): imports run down the list of packages,
never up, and the simulator stands apart. Checked on every import, lazy ones included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Top to bottom: a package may import those below it (and itself), never those above.
LAYERS = [
    "cli",
    "api",
    "local",
    "producer",
    "results",
    "batchfile",
    "analysis",
    "worker",
    "broker",
    "store",
    "schemas",
    "stats",
]
# Importable from anywhere: the error hierarchy, the settings, the version.
ANYWHERE = {"errors", "settings", "_version", "__init__"}


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [(node.lineno, n) for n in names if n == "jury" or n.startswith("jury.")]
    return found


def modules() -> list[Path]:
    return sorted((ROOT / "jury").rglob("*.py"))


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_run_down_the_layers(path: Path) -> None:
    here = path.relative_to(ROOT).with_suffix("").parts
    mine = here[1] if len(here) > 1 else "__init__"
    mine = mine.removesuffix(".py")
    if mine == "__init__" or mine == "__main__":
        return  # jury/__init__.py: the public names, imported lazily
    for line, imported in imports_of(path):
        theirs = package_of(imported)
        where = f"{path.relative_to(ROOT)}:{line} imports {imported}"
        if mine == "simulator":
            assert theirs in {"simulator", "errors"}, f"{where}: the simulator stands apart"
            continue
        if theirs in ANYWHERE or theirs == mine or theirs == "simulator":
            continue
        if mine == "settings" and theirs == "schemas":
            continue  # the settings build the egress policy (a schema), lazily
        if mine in ANYWHERE:
            assert theirs in ANYWHERE, f"{where}: {mine}.py sits below every package"
            continue
        assert LAYERS.index(theirs) > LAYERS.index(mine), f"{where}: an import up the layers"
