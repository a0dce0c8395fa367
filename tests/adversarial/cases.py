"""What a corpus case is, and the checks its outcomes share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from jury.cli.main import jury

CaseRun = Callable[[Path], None]  # does the hostile thing in a folder; raises if not as expected


@dataclass(frozen=True)
class Case:
    name: str
    klass: str
    expect: str  # what the user gets, in a few words
    run: CaseRun
    max_mib: float = 64.0  # peak of Python allocations while the case runs
    # Wall time of the case: a bound on a busy shared machine, far above what a case takes
    # (well under a second; a regression takes minutes or for ever).
    max_s: float = 20.0
    xfail: str | None = None  # why the case is expected to fail on this branch


CASES: list[Case] = []


def case(
    klass: str, expect: str, max_mib: float = 64.0, max_s: float = 20.0, xfail: str | None = None
) -> Callable[[CaseRun], CaseRun]:
    """Register the decorated function as a case of `klass`."""

    def register(run: CaseRun) -> CaseRun:
        CASES.append(Case(run.__name__, klass, expect, run, max_mib, max_s, xfail))
        return run

    return register


def submit(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """`jury ARGS` in this process: its exit code and everything it printed."""
    result = CliRunner().invoke(jury, args, env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"jury raised {result.exception!r}") from result.exception
    return result.exit_code, result.output


def refused(args: list[str], *needles: str, env: dict[str, str] | None = None) -> None:
    """`jury ARGS` ends with exit 2 and one paragraph holding every needle, no traceback and
    no raw control character."""
    code, output = submit(args, env)
    flat = " ".join(output.split())
    assert code == 2, f"exit {code}: {flat[:300]}"
    assert output.startswith("error:"), output[:300]
    assert "Traceback" not in output and "\n\n" not in output.strip(), output[:300]
    assert not any(c in output for c in "\x1b\x07\x08\u202e"), "a raw control character"
    for needle in needles:
        assert needle in flat, f"{needle!r} not in {flat[:400]!r}"


def accepted(args: list[str], *needles: str, env: dict[str, str] | None = None) -> str:
    """`jury ARGS` ends with exit 0, printing every needle and no raw control character."""
    code, output = submit(args, env)
    assert code == 0, f"exit {code}: {output[:400]}"
    assert not any(c in output for c in "\x1b\x07\u202e"), "a raw control character"
    for needle in needles:
        assert needle in output, f"{needle!r} not in {output[:400]!r}"
    return output


def write(folder: Path, name: str, text: str | bytes) -> Path:
    path = folder / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


PANEL = "judges: [openai/gpt-4o-mini]\ndimensions: [relevance]\n"


def batch_with_items(folder: Path, items: str, extra: str = "") -> Path:
    """A batch file whose `items:` is the given YAML value."""
    return write(folder, "batch.yaml", f"{PANEL}{extra}items: {items}\n")
