"""A background step that meets an outage says so in one line; our own bug keeps its traceback."""

from __future__ import annotations

import logging

import pytest
import redis
import sqlalchemy.exc

from jury.broker.redis_client import log_step_failure, outage

LOG = logging.getLogger("jury.test.steps")


def test_an_outage_is_one_line() -> None:
    cut = redis.ConnectionError("Error 113 connecting to 10.0.0.1:6379. No route to host.")
    assert (
        outage(cut) == "Redis unreachable: Error 113 connecting to 10.0.0.1:6379. No route to host."
    )
    down = sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("server closed\nthe end"))
    assert outage(down) == "database unreachable: server closed"
    assert outage(ValueError("ours")) is None


def test_log_step_failure_keeps_the_traceback_only_for_our_bugs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        log_step_failure(LOG, "sweeping", redis.TimeoutError("Timeout reading from socket"))
        try:
            raise ValueError("a bug of ours")
        except ValueError as exc:
            log_step_failure(LOG, "sweeping", exc)
    outage_record, bug_record = caplog.records
    assert outage_record.levelno == logging.WARNING and outage_record.exc_info is None
    assert outage_record.getMessage() == (
        "sweeping failed (Redis unreachable: Timeout reading from socket); trying again soon"
    )
    assert bug_record.levelno == logging.ERROR and bug_record.exc_info is not None
