"""What `submit --wait` and `status --watch` say when a batch may not be moving."""

from __future__ import annotations

from jury.producer.diagnosis import NO_WORKER_AFTER_S, Where, WorkerView, WorkerWatch, diagnose
from jury.settings import Settings

SETTINGS = Settings(
    broker_url="redis://:hunter2@redis-host:6379/0",
    database_url="postgresql://jury:pw@db-host/jury",
    queue="jury",
)
WHERE = Where.of(SETTINGS, ["jury.lane0", "jury.lane1"])


def test_no_worker_is_said_after_a_grace_and_names_what_to_check() -> None:
    assert diagnose(WHERE, None, NO_WORKER_AFTER_S - 1, None) is None
    text = diagnose(WHERE, WorkerView({}), NO_WORKER_AFTER_S + 1, None)
    assert text is not None and text.startswith("no live worker serves this batch's queues")
    assert "jury.lane0, jury.lane1" in text
    for needed in (
        "JURY_BROKER_URL=redis://:**@redis-host",
        "JURY_DATABASE_URL=post",
        "jury worker",
    ):
        assert needed in text
    assert "hunter2" not in text and ":pw@" not in text


def test_a_worker_on_other_queues_does_not_count() -> None:
    view = WorkerView({"w@h": (frozenset({"other.lane0"}), WHERE.store)})
    assert diagnose(WHERE, view, 30, None) is not None


def test_workers_on_another_database_are_named() -> None:
    view = WorkerView(
        {
            "good@h": (frozenset({"jury.lane0"}), WHERE.store),
            "stray@h": (frozenset({"jury.lane0", "jury.lane1"}), "0123456789abcdef"),
        }
    )
    text = diagnose(WHERE, view, 0, None)
    assert text is not None and text.startswith("some workers serving this batch's queues")
    assert "stray@h" in text and "good@h" not in text and "JURY_DATABASE_URL" in text
    healthy = WorkerView({"good@h": (frozenset({"jury.lane1"}), WHERE.store)})
    assert diagnose(WHERE, healthy, 0, None) is None


def test_an_unreachable_broker_is_said() -> None:
    text = diagnose(WHERE, None, 10, "ConnectionError: refused")
    assert text is not None and "cannot ask the workers" in text and "refused" in text
    assert text.startswith("Redis unreachable, retrying")
    since = diagnose(WHERE, None, 10, "ConnectionError: refused", "14:03:07")
    assert since is not None and since.startswith("Redis unreachable since 14:03:07, retrying")


def test_the_watch_remembers_when_a_worker_last_served() -> None:
    now = [100.0]
    answers: list[WorkerView] = [WorkerView({"w@h": (frozenset({"jury.lane1"}), WHERE.store)})]

    def probe() -> WorkerView:
        return answers[-1]

    watch = WorkerWatch(probe, WHERE, clock=lambda: now[0])
    watch._last_served = now[0]
    watch.check()
    assert watch.message() is None
    answers.append(WorkerView({}))
    now[0] += 3
    watch.check()
    assert watch.message() is None  # gone for 3 s only
    now[0] += NO_WORKER_AFTER_S
    assert watch.message() is not None
