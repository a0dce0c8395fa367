"""A command that meets an unreachable database or Redis says so in one paragraph, exit 1,
never a traceback; any other exception (our bug) keeps its traceback."""

from __future__ import annotations

import click
import pytest
import redis
import sqlalchemy.exc
from click.testing import CliRunner

from jury.cli.common import user_errors


def command_raising(exc: Exception) -> click.Command:
    @click.command()
    @user_errors
    def status() -> None:
        raise exc

    return status


@pytest.mark.parametrize(
    "exc, says",
    [
        (
            sqlalchemy.exc.OperationalError("SELECT 1", {}, OSError("connection refused")),
            "database unreachable",
        ),
        (redis.ConnectionError("Error 111 connecting to 127.0.0.1:6379"), "Redis unreachable"),
    ],
)
def test_an_outage_is_one_paragraph(exc: Exception, says: str) -> None:
    result = CliRunner().invoke(command_raising(exc))
    assert result.exit_code == 1
    assert says in result.output and "Try again once it answers" in result.output
    assert ("Traceback" not in result.output and result.exception is None) or isinstance(
        result.exception, SystemExit
    )


def test_our_own_bug_keeps_its_traceback() -> None:
    result = CliRunner().invoke(command_raising(KeyError("oops")))
    assert isinstance(result.exception, KeyError)
