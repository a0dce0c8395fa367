"""The worker supervisor's command-line handling (jury.worker.supervisor)."""

from __future__ import annotations

import os
import signal

from jury.worker.supervisor import (
    Child,
    Supervisor,
    child_node_name,
    processes_wanted,
    take_processes_option,
)


def test_processes_option_is_taken_out_of_celery_s_options() -> None:
    assert take_processes_option(["--processes", "3", "-n", "a@h"]) == ("3", ["-n", "a@h"])
    assert take_processes_option(["--processes=0", "--loglevel=DEBUG"]) == (
        "0",
        ["--loglevel=DEBUG"],
    )
    assert take_processes_option(["-n", "a@h"]) == (None, ["-n", "a@h"])


def test_each_child_gets_a_node_name_of_its_own() -> None:
    assert child_node_name(["-n", "w@host", "-E"], 2) == ["-n", "w-2@host", "-E"]
    assert child_node_name(["--hostname=w@%h"], 1) == ["--hostname", "w-1@%h"]
    assert child_node_name(["-nw@h"], 3) == ["-n", "w-3@h"]
    assert child_node_name(["--loglevel", "INFO"], 1) == ["--loglevel", "INFO"]


def test_zero_processes_is_one_per_core() -> None:
    assert processes_wanted(3) == 3
    assert processes_wanted(0) == len(os.sched_getaffinity(0))


def exited(code: int) -> int:
    return code << 8  # a wait status, as os.waitpid gives it


def supervisor(now: list[float], started: list[int]) -> Supervisor:
    def start(index: int) -> int:
        started.append(index)
        return 1000 + len(started)

    return Supervisor(2, start, lambda line: None, clock=lambda: now[0])


def test_a_killed_worker_is_replaced_with_a_pause_if_it_died_young() -> None:
    now, started = [100.0], list[int]()
    watch = supervisor(now, started)
    old = Child(1, 11, started=0.0)
    watch._ended(old, signal.SIGKILL)  # lived 100 s: replaced at once
    assert old.restart_at == 100.0 and old.pause_s == 0
    watch._restart_due()
    assert started == [1] and watch.children[1001].index == 1
    now[0] = 102.0
    watch.children.pop(1001)
    watch._ended(old, signal.SIGKILL)  # lived 2 s: a pause, doubled each time it dies young
    assert old.pause_s == 1.0
    watch._restart_due()
    assert started == [1]  # not yet
    now[0] = 103.0
    watch._restart_due()
    assert started == [1, 1]
    watch.children.pop(1002)
    watch._ended(old, signal.SIGSEGV)
    assert old.pause_s == 2.0


def test_a_worker_that_fails_at_its_start_stops_them_all() -> None:
    now, started = [5.0], list[int]()
    watch = supervisor(now, started)
    watch._ended(Child(2, 12, started=0.0), exited(2))
    assert watch.stopping and watch.failure == 2 and not watch.waiting
    watch._restart_due()
    assert started == []


def test_a_worker_that_exits_cleanly_is_not_replaced() -> None:
    now, started = [500.0], list[int]()
    watch = supervisor(now, started)
    watch._ended(Child(1, 11, started=0.0), exited(0))
    assert not watch.waiting and not watch.stopping and watch.failure == 0
