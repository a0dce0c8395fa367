"""The CLI runs batches through the public Python API (jury.api): no command module imports
the loading, submission or control internals the API wraps, so that `jury submit` and
`jury.submit` cannot drift apart (issue 34: one submit path)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

# What jury.api wraps: reading and choosing a batch's items, planning it, recording and
# queueing it, following it with a worker diagnosis, cancelling and resuming it.
FORBIDDEN_MODULES = {
    "jury.batchfile.loading",
    "jury.batchfile.overrides",
    "jury.batchfile.planning",
    "jury.producer.submission",
    "jury.producer.publishing",
    "jury.producer.control",
    "jury.producer.diagnosis",
}
# Modules the CLI uses for other things, with the names of them the API wraps.
FORBIDDEN_NAMES = {
    "jury.batchfile.starter": {"first_items"},  # `jury init` writes its starter files
    "jury.producer.following": {"follow_batch"},  # the display helpers stay the CLI's
}


def imports(source: str) -> set[tuple[str, str | None]]:
    """(module, name) for every import anywhere in the source, function bodies included;
    name is None for `import module`."""
    found: set[tuple[str, str | None]] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.update((node.module, alias.name) for alias in node.names)
    return found


def forbidden(found: set[tuple[str, str | None]]) -> list[str]:
    return sorted(
        f"{module}.{name}" if name else module
        for module, name in found
        if module in FORBIDDEN_MODULES or name in FORBIDDEN_NAMES.get(module, ())
    )


def test_no_cli_module_imports_what_the_api_wraps() -> None:
    modules = sorted((ROOT / "jury" / "cli").glob("*.py"))
    assert len(modules) >= 8
    offending = {
        path.name: names for path in modules if (names := forbidden(imports(path.read_text())))
    }
    assert offending == {}


def test_the_batch_commands_call_the_api() -> None:
    found = imports((ROOT / "jury" / "cli" / "batches.py").read_text())
    assert {("jury.api", "prepare"), ("jury.api", "attach")} <= found


def test_the_check_sees_imports_anywhere(tmp_path: Path) -> None:
    source = (
        "import jury.producer.control\n"
        "from jury.batchfile.starter import write_starter\n"
        "def command():\n"
        "    from jury.batchfile.starter import first_items\n"
        "    from jury.producer.submission import submit_batch\n"
    )
    assert forbidden(imports(source)) == [
        "jury.batchfile.starter.first_items",
        "jury.producer.control",
        "jury.producer.submission.submit_batch",
    ]
