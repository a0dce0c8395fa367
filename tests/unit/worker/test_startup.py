"""A worker's start (jury.worker.startup): a broker that is not Redis is refused before
anything connects; waiting for Redis says one line per attempt, names where the URL came
from, and stops at JURY_BROKER_WAIT."""

from __future__ import annotations

from jury.settings import Settings
from jury.worker.startup import RETRY_MAX_S, check_broker_kind, wait_for_broker

NOWHERE = "redis://127.0.0.1:1/0"  # port 1: refused at once


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_broker_that_is_not_redis_is_refused_without_connecting() -> None:
    refused = check_broker_kind(Settings(broker_url="amqp://guest:secret@127.0.0.1:1//"))
    assert refused is not None and "is amqp; jury needs Redis" in refused
    assert "(JURY_BROKER_URL)" in refused and "secret" not in refused
    unknown = check_broker_kind(Settings(broker_url="carrier-pigeon://loft"))
    assert unknown is not None and "jury needs Redis" in unknown
    assert check_broker_kind(Settings(broker_url="sentinel://127.0.0.1:1")) is None


def test_waiting_for_redis_names_the_default_when_the_variable_is_unset() -> None:
    # As Settings.from_env({}) leaves it, but pointing nowhere: the default of another host.
    unset = Settings.model_construct(broker_url=NOWHERE, broker_wait_s=30.0, _fields_set=set())
    clock, lines = Clock(), list[str]()
    gave_up = wait_for_broker(unset, lines.append, clock, clock.sleep)
    assert gave_up is not None and "Gave up after" in gave_up and "JURY_BROKER_WAIT" in gave_up
    assert all("(the default, as JURY_BROKER_URL is unset)" in line for line in [*lines, gave_up])
    assert all("\n" not in line and "Traceback" not in line for line in lines)
    # Spaced 1, 2, 4, 8 s, then at most RETRY_MAX_S, and never past the 30 s given.
    assert clock.slept[:4] == [1.0, 2.0, 4.0, 8.0] and max(clock.slept) <= RETRY_MAX_S
    assert sum(clock.slept) == 30.0 and len(lines) == len(clock.slept)


def test_waiting_for_redis_names_the_variable_when_set() -> None:
    settings = Settings.from_env({"JURY_BROKER_URL": NOWHERE, "JURY_BROKER_WAIT": "0"})
    clock, lines = Clock(), list[str]()
    gave_up = wait_for_broker(settings, lines.append, clock, clock.sleep)
    assert lines == [] and gave_up is not None and "(JURY_BROKER_URL)" in gave_up
