"""`${VAR}` and `${VAR:-default}` placeholders in a judge's settings. Pure functions.

A placeholder is stored as written, everywhere: in the batch's configuration row, in Redis,
in results and reports. It is expanded only by the worker, in the environment of the process
that makes the call, just before the call: a key in an `api_base` query string or a model
name that differs per machine never reaches the database, a log or a task message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple, TypeVar

from pydantic import BaseModel

from jury.errors import PermanentJudgeError

PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# The only fields whose placeholders are expanded (the batch validates them there): text
# anywhere else (a prompt template's) stays as written, so that no worker's variable can be
# written into a prompt and read back in a judge's answer.
PLACEHOLDER_FIELDS = ("model", "api_base", "api_key_env")
# Secrets shorter than this are not redacted from error messages: they would match by chance.
MIN_REDACTED_CHARS = 6

Model = TypeVar("Model", bound=BaseModel)


class PlaceholderError(ValueError):
    """A placeholder names a variable that is unset and has no default, or is malformed."""


class Expanded(NamedTuple):
    text: str
    # The values taken from the environment (not defaults): to keep out of error messages.
    secrets: tuple[str, ...]


def has_placeholder(text: str) -> bool:
    return "${" in text


def placeholder_problem(text: str) -> str | None:
    """Why the placeholders in `text` are malformed (`${}`, `${1X}`, an unclosed `${`)."""
    if "${" in PLACEHOLDER.sub("", text):
        return (
            "a placeholder must read ${NAME} or ${NAME:-default}, with NAME made of letters, "
            "digits and _ (not starting with a digit)"
        )
    return None


def expand_text(text: str, env: Mapping[str, str]) -> Expanded:
    """`text` with every placeholder replaced from `env`; PlaceholderError names the first
    variable that is unset (or empty) and has no default."""
    secrets: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = env.get(name)
        if value:
            secrets.append(value)
            return value
        if default is None:
            raise PlaceholderError(f"environment variable {name} is not set and has no default")
        return default

    problem = placeholder_problem(text)
    if problem:
        raise PlaceholderError(problem)
    return Expanded(PLACEHOLDER.sub(replace, text), tuple(secrets))


def taken_variables(text: str | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """The variables whose values `text`'s placeholders take from `env` (a default used
    takes nothing): what a call carries out of the worker, for the egress policy to judge."""
    if not text or not has_placeholder(text):
        return ()
    return tuple(
        dict.fromkeys(m.group(1) for m in PLACEHOLDER.finditer(text) if env.get(m.group(1)))
    )


def expand_fields(model: Model, env: Mapping[str, str]) -> tuple[Model, tuple[str, ...]]:
    """A copy of `model` with the placeholders in its PLACEHOLDER_FIELDS expanded, and the
    values taken from `env`. The copy is not validated again: validate it where that is
    wanted (the producer checks an expanded copy of each judge; the stored one keeps the
    placeholders)."""
    updates: dict[str, str] = {}
    secrets: list[str] = []
    for name in PLACEHOLDER_FIELDS:
        value = getattr(model, name, None)
        if isinstance(value, str) and has_placeholder(value):
            try:
                expanded = expand_text(value, env)
            except PlaceholderError as exc:
                raise PlaceholderError(f"{name}: {exc}") from None
            updates[name] = expanded.text
            secrets += expanded.secrets
    if not updates:
        return model, ()
    return model.model_copy(update=updates), tuple(secrets)


def call_settings(model: Model, env: Mapping[str, str]) -> tuple[Model, tuple[str, ...]]:
    """`expand_fields` where a call is made: a variable unset there fails the call for good
    (kind `missing_env`), as a missing key does."""
    try:
        return expand_fields(model, env)
    except PlaceholderError as exc:
        raise PermanentJudgeError(f"{exc} on this worker", kind="missing_env") from None


def redact(text: str, secrets: tuple[str, ...] | list[str]) -> str:
    """`text` with every secret long enough to be one replaced by `***`."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= MIN_REDACTED_CHARS:
            text = text.replace(secret, "***")
    return text
