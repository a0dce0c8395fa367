"""The examples a page marks as running (RUNS_MARK on the line before a fenced code block), and
the runner of its shell ones (```sh): test_examples.py runs them, test_docs checks the marks.

The shell runner takes a user's way through a page: its marked blocks in order, line by line,
in one folder, with the `jury` of a chosen bin folder first on PATH.

What the runner does to a line before running it, and nothing more:
- `<batch-id>` becomes the id the page's last `jury submit` printed (its last line),
  `<item-id>` an item of that batch; any other `<placeholder>` fails the page.
- A port a line passes to `--port` is a free port of this machine instead, in every marked
  line of the page (`JURY_EGRESS_ALLOW=127.0.0.1:8011` follows `--port 8011`).
- `export NAME=VALUE` sets NAME for the page's later lines.
- A line ending in `&` runs in the background until the page ends (if it has a `--port`, the
  next foreground line waits until that port answers), then stops with its process group. It
  must not exit with an error code, then or before, and neither it nor a foreground line may
  print a traceback.
- A foreground line must exit 0, or N where its comment says `exits N`.
A failure names the page, the block and the line."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jury.local.services import free_port

SHELL_LANGUAGE = "sh"
# Put on the line before a fenced code block, this says the block runs as written.
# Invisible on GitHub and in the site (an HTML comment).
RUNS_MARK = "<!-- example: runs -->"
# `  # a comment` to the end of the line (the docs put two spaces or more before it).
_COMMENT = re.compile(r"\s+#(?:\s.*)?$")
_EXIT_NOTE = re.compile(r"\bexits (\d+)\b")
_PORT = re.compile(r"--port[ =](\d+)\b")
_PLACEHOLDER = re.compile(r"<([a-z][a-z0-9-]*)>")
TRACEBACK = "Traceback (most recent call last)"


@dataclass(frozen=True)
class Line:
    """One command of a marked block, as the page writes it (less its comment)."""

    page: str
    block: int  # the page's n-th marked shell block, from 1
    number: int  # the line in that block, from 1
    command: str
    background: bool = False
    exit_code: int = 0

    def where(self) -> str:
        return f"{self.page}, block {self.block}, line {self.number}: `{self.command}`"


def marked_blocks(text: str, language: str) -> list[str]:
    """The code of each block of `language` that RUNS_MARK marks as running, in page order."""
    pattern = re.escape(RUNS_MARK) + r"\n```" + re.escape(language) + r"\n(.*?)^```"
    return re.findall(pattern, text, flags=re.S | re.M)


def marked_examples(page: Path, language: str) -> list[str]:
    return marked_blocks(page.read_text(), language)


def parse_line(page: str, block: int, number: int, text: str) -> Line | None:
    """The command on one line of a block; None for a blank or comment-only line."""
    comment = _COMMENT.search(text)
    command = (text[: comment.start()] if comment else text).strip()
    if not command or command.startswith("#"):
        return None
    background = command.endswith("&") and not command.endswith("&&")
    if background:
        command = command[:-1].rstrip()
    note = _EXIT_NOTE.search(comment.group(0)) if comment else None
    return Line(page, block, number, command, background, int(note.group(1)) if note else 0)


def page_lines(page: str, text: str) -> list[Line]:
    lines = []
    for block, code in enumerate(marked_blocks(text, SHELL_LANGUAGE), start=1):
        for number, raw in enumerate(code.splitlines(), start=1):
            line = parse_line(page, block, number, raw)
            if line is not None:
                lines.append(line)
    return lines


def doc_ports(lines: Iterable[Line]) -> set[int]:
    """The ports the page's commands listen on (`--port N`)."""
    return {int(port) for line in lines for port in _PORT.findall(line.command)}


def free_ports(lines: Iterable[Line]) -> dict[int, int]:
    """A free port of this machine for each port of the page."""
    return {port: free_port() for port in sorted(doc_ports(lines))}


def with_ports(command: str, ports: Mapping[int, int]) -> str:
    """The command with each of the page's ports replaced by the one it has here."""
    if not ports:
        return command
    numbers = "|".join(str(port) for port in sorted(ports))
    return re.sub(rf"(?<![\d.])({numbers})(?![\d.])", lambda m: str(ports[int(m[1])]), command)


def fill(command: str, values: Mapping[str, str]) -> str:
    """The command with its placeholders filled; a placeholder with no value fails."""

    def value(match: re.Match[str]) -> str:
        if match[1] not in values:
            raise KeyError(match[1])
        return values[match[1]]

    return _PLACEHOLDER.sub(value, command)


def exports(command: str) -> dict[str, str] | None:
    """What an `export NAME=VALUE …` line sets; None for any other command."""
    words = shlex.split(command)
    if not words or words[0] != "export":
        return None
    return dict(word.split("=", 1) for word in words[1:])


def printed_batch_id(command: str, stdout: str) -> str | None:
    """The batch id a `jury submit` that enqueued prints as its last line."""
    words = command.split()
    if words[:2] != ["jury", "submit"] or "--dry-run" in words:
        return None
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    return lines[-1] if lines else None


@dataclass
class _Background:
    line: Line
    process: subprocess.Popen[bytes]
    log: Path


@dataclass
class PageRun:
    """One page's marked blocks, run in `folder` with `env` (PATH, JURY_*) as they come.
    `item_of(batch_id)` names an item of a batch, for `<item-id>`."""

    folder: Path
    env: dict[str, str]
    item_of: Callable[[str], str]
    logs: Path
    ports: dict[int, int] = field(default_factory=dict)
    timeout: float = 180.0
    values: dict[str, str] = field(default_factory=dict)
    background: list[_Background] = field(default_factory=list)
    starting: list[tuple[_Background, int]] = field(default_factory=list)
    # Each line and the seconds it took (a background one: to be started), for a report.
    took: list[tuple[Line, float]] = field(default_factory=list)

    def command(self, line: Line) -> str:
        try:
            return fill(with_ports(line.command, self.ports), self._values_for(line))
        except KeyError as missing:
            name = missing.args[0]
            raise AssertionError(f"{line.where()}: nothing earlier gives <{name}>") from None

    def _values_for(self, line: Line) -> dict[str, str]:
        wanted = "<item-id>" in line.command and "item-id" not in self.values
        if wanted and "batch-id" in self.values:
            self.values["item-id"] = self.item_of(self.values["batch-id"])
        return self.values

    def run(self, line: Line) -> None:
        started = time.monotonic()
        self._run_line(line)
        self.took.append((line, time.monotonic() - started))

    def _run_line(self, line: Line) -> None:
        command = self.command(line)
        exported = exports(command)
        if exported is not None:
            self.env.update(exported)
        elif line.background:
            self._start(line, command)
        else:
            self._run(line, command)

    def _run(self, line: Line, command: str) -> None:
        while self.starting:
            self._wait_for_port(*self.starting.pop(0))
        try:
            ran = subprocess.run(
                ["bash", "-c", command],
                cwd=self.folder,
                env=self.env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=self.timeout,
            )
        except subprocess.TimeoutExpired as timed_out:
            said = _text(timed_out.stdout) + _text(timed_out.stderr)
            late = f"{line.where()} ran past {self.timeout:g} s:\n{said[-3000:]}"
            raise AssertionError(late) from None
        said = f"{ran.stdout[-2000:]}\n{ran.stderr[-3000:]}"
        assert ran.returncode == line.exit_code, (
            f"{line.where()} exited {ran.returncode}, not {line.exit_code}:\n{said}"
        )
        assert TRACEBACK not in ran.stdout + ran.stderr, f"{line.where()} printed:\n{said}"
        batch_id = printed_batch_id(command, ran.stdout)
        if batch_id is not None:
            self.values = {"batch-id": batch_id}  # an earlier batch's item is no longer one

    def _start(self, line: Line, command: str) -> None:
        log = self.logs / f"{line.page}-{line.block}-{line.number}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["bash", "-c", f"exec {command}"],
                cwd=self.folder,
                env=dict(self.env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, stopped whole at the end
            )
        started = _Background(line, process, log)
        self.background.append(started)
        # Waited for before the next foreground line: what starts in a row boots at once.
        self.starting.extend((started, int(port)) for port in _PORT.findall(command))

    def _wait_for_port(self, started: _Background, port: int) -> None:
        deadline = time.monotonic() + 60
        while not _listening(port):
            if started.process.poll() is not None or time.monotonic() > deadline:
                said = started.log.read_text(errors="replace")[-3000:]
                raise AssertionError(f"{started.line.where()} never listened on {port}:\n{said}")
            time.sleep(0.05)

    def close(self) -> None:
        """Stop what the page started in the background (last first), then fail if one of
        them had died early or printed a traceback."""
        problems = []
        while self.starting:
            try:
                self._wait_for_port(*self.starting.pop(0))
            except AssertionError as never:
                problems.append(str(never))
        for started in reversed(self.background):
            _stop_group(started.process)
            said = started.log.read_text(errors="replace")
            # Ended by our signal (a negative code) or well (0): an exit of its own with an
            # error, before the page ended or when asked to stop, is not.
            code = started.process.returncode
            if code > 0:
                problems.append(f"{started.line.where()} exited {code}:\n{said[-3000:]}")
            elif TRACEBACK in said:
                problems.append(f"{started.line.where()} printed:\n{said[-3000:]}")
        assert not problems, "\n".join(problems)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _stop_group(process: subprocess.Popen[bytes], grace: float = 20.0) -> None:
    """SIGTERM the process's group (the command and what it started), SIGKILL after `grace`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(grace)
            # Its group may outlive it (a child it did not wait for): make sure it is gone.
            os.killpg(process.pid, signal.SIGKILL)
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            pass
        return


def _text(output: str | bytes | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def run_page(lines: list[Line], run: PageRun) -> None:
    """Every line in order; whatever fails, what the page started is stopped."""
    try:
        for line in lines:
            run.run(line)
    finally:
        run.close()
