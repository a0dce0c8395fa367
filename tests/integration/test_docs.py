"""The documentation: a short README whose every link resolves, an MkDocs site that builds
offline with --strict, a CLI reference generated from the commands and up to date, no
reference to files outside the repository, and examples marked as running (RUNS_MARK of
tests/doc_examples.py, run by test_examples.py) that are well-formed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from jury.cli.reference import reference
from tests.conftest import ROOT
from tests.doc_examples import RUNS_MARK

README = ROOT / "README.md"
# Markdown links and images: [text](target) — not inside code.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _outside_code(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


def test_every_runs_mark_is_on_the_line_before_a_code_block() -> None:
    for page in [README, *(ROOT / "docs").rglob("*.md")]:
        text = page.read_text()
        marks = text.count(RUNS_MARK)
        blocks = len(re.findall(re.escape(RUNS_MARK) + r"\n```[a-z]+\n", text))
        assert marks == blocks, f"{page.name}: a {RUNS_MARK} not right before a code block"


def test_the_readme_is_short_and_every_link_resolves() -> None:
    text = README.read_text()
    assert len(text.encode()) < 12 * 1024
    links = LINK.findall(_outside_code(text))
    assert len(links) >= 10
    for target in links:
        assert not target.startswith(("http://", "https://")), (
            f"{target}: the README links only files"
        )
        path, _, _anchor = target.partition("#")
        assert (ROOT / path).exists(), f"README links {target}, which does not exist"


def test_the_cli_reference_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "cli.md").read_text()
    assert committed == reference(), "run `make docs` (or python -m jury.cli.reference docs/cli.md)"
    for command in ("submit", "status", "list", "show", "results", "report", "init", "demo"):
        assert f"## jury {command}\n" in committed


def test_the_site_builds_offline_and_strict(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert built.returncode == 0, built.stderr
    pages = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("index.html")}
    assert {"architecture/index.html", "cli/index.html", "benchmarks/index.html"} <= pages
    for page in tmp_path.rglob("*.html"):  # nothing fetched from elsewhere when read offline
        assert not re.search(r'(?:src|href)="https?://(?!www\.mkdocs\.org)', page.read_text())


def test_every_benchmark_page_says_which_command_produced_it() -> None:
    for page in (ROOT / "docs" / "benchmarks").glob("*.md"):
        if page.name != "index.md":
            assert re.search(r"Produced by `make bench-[a-z]+`", page.read_text()), page.name


def test_nothing_refers_to_files_outside_the_repository() -> None:
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    me = Path(__file__).name
    for name in files:
        path = ROOT / name
        if name.endswith(me) or not path.is_file() or path.suffix in (".png", ".whl"):
            continue
        text = path.read_text(errors="replace")
        # Spelt in two parts, so this file does not name them itself.
        for needle in ("DESIGN" + ".md", "../" + "shared"):
            assert needle not in text, f"{name} refers to {needle}, which users do not have"
