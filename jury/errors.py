"""One error hierarchy for all of jury: every error we raise on purpose is a JuryError; and
how a process of ours ends on Ctrl-C once its work is done (ctrl_c_ends_quietly)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType

# The exit status of a process ended by Ctrl-C (128 + SIGINT), as the shell reports it.
EXIT_INTERRUPTED = 130


class JuryError(Exception):
    """Base of every error jury raises deliberately; the CLI prints these without a traceback."""


MAX_PROBLEM_CHARS = 600


class BatchFileError(JuryError):
    """A batch file (or its items file) is unreadable or invalid; nothing was enqueued."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        # Each problem at most a few lines long: whatever value or line of a file it quotes,
        # an error shows a short excerpt of it, never the whole.
        self.problems = [
            p if len(p) <= MAX_PROBLEM_CHARS else p[:MAX_PROBLEM_CHARS] + "…" for p in problems
        ]
        shown = self.problems[:20]
        more = f"\n  … and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        super().__init__(
            f"{source}: invalid batch, nothing was enqueued.\n  " + "\n  ".join(shown) + more
        )


class UnknownBatchError(JuryError):
    """No batch with this id is recorded in the store."""


class BatchExistsError(JuryError):
    """A batch with this id is already recorded (a reused `--batch-id`)."""

    def __init__(self, batch_id: str) -> None:
        super().__init__(
            f"a batch with id {batch_id!r} already exists in this database, so nothing was "
            f"enqueued. Leave --batch-id out to get a new id, choose another one, or, to go "
            f"on with the existing batch, `jury status {batch_id}` and `jury resume {batch_id}`."
        )


class BatchRunningError(JuryError):
    """The batch has not finished, and the caller asked not to wait (`results(wait=False)`)."""


class WaitTimeoutError(JuryError):
    """The batch was still running when waiting for it gave up at its timeout."""


class ConfigurationError(JuryError):
    """The environment (broker URL, database URL, …) is unusable."""


class JudgeCallError(JuryError):
    """A judge call failed; `transient` says whether another attempt may succeed."""

    transient = True

    def __init__(
        self, message: str, *, kind: str = "error", retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after


class TransientJudgeError(JudgeCallError):
    """Timeouts, connection errors, 5xx, 429, unparseable output: worth another attempt."""


class PermanentJudgeError(JudgeCallError):
    """Bad request, unknown model, missing key: another attempt would fail the same way."""

    transient = False


class EgressRefused(PermanentJudgeError):
    """The operator's egress policy (jury.schemas.egress) refused a call: a key to a host not
    listed for it, an address the workers may not reach, a variable that may not leave, a
    redirect. Nothing was sent, or nothing more; another attempt would be refused the same
    way, so it is never retried. The message names the setting that would allow it."""

    def __init__(self, message: str, *, kind: str = "egress_refused") -> None:
        super().__init__(message, kind=kind)


class ScoreParseError(TransientJudgeError):
    """The judge's answer holds no usable score (none found, or outside the scale)."""

    def __init__(self, message: str, *, kind: str = "unparseable") -> None:
        super().__init__(message, kind=kind)


class JudgmentFailed(JuryError):
    """A judge task stored its sample(s) as failed: its Celery state is FAILURE (Flower shows
    it so, with this message), yet it is acknowledged and never redelivered, since the
    failure is stored and `jury resume` is the way to ask again."""

    # `kind` has a default: Celery rebuilds the exception from its message alone to report
    # it, and would otherwise fall back to a parent class's name.
    def __init__(self, message: str, *, kind: str = "error") -> None:
        super().__init__(message)
        self.kind = kind


def _end_now(signum: int, frame: FrameType | None) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or broken stream: nothing to keep
            stream.flush()
    os._exit(EXIT_INTERRUPTED)


def ctrl_c_ends_quietly() -> None:
    """From now on, Ctrl-C ends the process at once, with status 130 and nothing printed.

    For a process whose work is done and which is only exiting: joining threads and running
    atexit callbacks, LiteLLM's among them (it closes its HTTP clients on a fresh event loop,
    litellm/llms/custom_httpx/async_client_cleanup.py, and flushes its logging queue,
    litellm_core_utils/logging_worker.py; both catch Exception, not KeyboardInterrupt). A
    Ctrl-C landing there raised KeyboardInterrupt inside the callback, and Python printed
    `Exception ignored in atexit callback … KeyboardInterrupt` with a traceback. Outside the
    main thread Python allows no handler: then nothing changes."""
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGINT, _end_now)


class MessageRefused(JuryError):
    """A task message that does not fit the batch as stored: forged, or left over (a batch or
    item no longer there). It is dropped: acknowledged and never redelivered, nothing called,
    paid or stored; the worker logs it as one line, without a traceback."""
