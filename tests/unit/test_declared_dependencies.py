"""Every package jury's code imports is one pyproject.toml declares (a dependency or an
extra): one that only arrives with another package's dependencies breaks the day that
package drops it, and pip's resolver never sees the version jury relies on."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Imported, but part of a declared package's own promise rather than a choice of jury's.
COMES_WITH = {
    "pydantic_core": "pydantic",  # pydantic's core, pinned by pydantic itself
    "openai": "litellm",  # loaded only to warm LiteLLM's own OpenAI provider (llm_client)
}


def imported_top_level_modules(package: Path) -> set[str]:
    names: set[str] = set()
    for source in package.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != package.name}


def declared_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    return {_normal(re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0]) for r in requirements}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_imported_package_is_declared() -> None:
    providers = importlib.metadata.packages_distributions()
    declared = declared_distributions()
    undeclared = {}
    for module in sorted(imported_top_level_modules(ROOT / "jury")):
        if _normal(COMES_WITH.get(module, "")) in declared:
            continue
        distributions = {_normal(d) for d in providers.get(module, [module])}
        if not distributions & declared:
            undeclared[module] = sorted(distributions)
    assert undeclared == {}


def test_the_check_sees_an_import_nobody_declared(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    source = "import json\nimport httpx.foo\nfrom . import b\nfrom pkg import c\n"
    (package / "a.py").write_text(source)
    assert imported_top_level_modules(package) == {"httpx"}
