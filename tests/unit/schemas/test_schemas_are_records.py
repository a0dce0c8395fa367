"""jury.schemas holds configuration and records only: no module of it imports jury.stats (or
anything of jury's above it). Computations live in stats, worker.judging or analysis."""

from __future__ import annotations

import ast
from pathlib import Path

import jury.schemas

SCHEMAS = Path(jury.schemas.__file__).parent
# What a schema may import of jury's: other schemas, the error tree, the settings.
ALLOWED = ("jury.schemas", "jury.errors", "jury.settings")


def _jury_imports(path: Path) -> set[str]:
    """Every module of jury's the file imports, at its top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "jury" or name.startswith("jury.")}


def test_no_schema_module_imports_jury_stats() -> None:
    modules = sorted(SCHEMAS.glob("*.py"))
    assert len(modules) > 10  # the folder was found
    offending = {
        path.name: sorted(i for i in _jury_imports(path) if not i.startswith(ALLOWED))
        for path in modules
    }
    assert {name: found for name, found in offending.items() if found} == {}


def test_the_check_sees_an_import_of_jury_stats(tmp_path: Path) -> None:
    module = tmp_path / "computing.py"
    module.write_text("def f():\n    from jury.stats.panel import across_models\n")
    assert _jury_imports(module) == {"jury.stats.panel"}
