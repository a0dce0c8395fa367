"""One error hierarchy for all of jury: every error we raise on purpose is a JuryError."""

from __future__ import annotations


class JuryError(Exception):
    """Base of every error jury raises deliberately; the CLI prints these without a traceback."""


class BatchFileError(JuryError):
    """A batch file (or its items file) is unreadable or invalid; nothing was enqueued."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        shown = problems[:20]
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


class MessageRefused(JuryError):
    """A task message that does not fit the batch as stored: forged, or left over (a batch or
    item no longer there). It is dropped: acknowledged and never redelivered, nothing called,
    paid or stored; the worker logs it as one line, without a traceback."""
