"""A follower's reads through an outage (jury.producer.outages): one line while it lasts, the
read again once the store answers, and an end past the limit; any other error is an error."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest
import redis
import sqlalchemy.exc

from jury.producer.outages import FollowingLost, Outage, ride_out

DOWN = sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("connection refused"))


def reads(*outcomes: object) -> Callable[[], object]:
    """A read that raises or returns each of `outcomes` in turn."""
    left = list(outcomes)

    def read() -> object:
        outcome = left.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return read


def test_an_outage_is_one_line_while_it_lasts_and_over_when_the_store_answers() -> None:
    now = [0.0]
    outages = Outage("b1", 60, clock=lambda: now[0], wall=lambda: datetime(2026, 1, 1, 14, 3, 7))
    read = reads(DOWN, DOWN, "status", redis.ConnectionError("reset"), "again")
    assert outages.attempt(read) is None
    assert outages.line == "database unreachable since 14:03:07, retrying"
    now[0] = 30
    assert outages.attempt(read) is None and outages.line.endswith("14:03:07, retrying")
    assert outages.attempt(read) == "status" and outages.line is None
    assert outages.attempt(read) is None and outages.line.startswith("Redis unreachable since")
    assert outages.attempt(read) == "again"


def test_following_stops_past_the_limit_in_one_paragraph() -> None:
    now = [0.0]
    outages = Outage("b1", 60, clock=lambda: now[0])
    said: list[str] = []

    def pause() -> None:
        now[0] += 1

    with pytest.raises(FollowingLost) as lost:
        ride_out(reads(*[DOWN] * 100), outages, said.append, pause)
    assert len(said) == 1 and said[0].startswith("database unreachable since")
    assert "for more than 60 s" in str(lost.value) and "jury status b1 --watch" in str(lost.value)
    assert ride_out(reads(DOWN, DOWN, 7), Outage("b1"), said.append, lambda: None) == 7


def test_an_error_that_is_no_outage_is_raised() -> None:
    with pytest.raises(KeyError):
        Outage("b1").attempt(reads(KeyError("bug")))
