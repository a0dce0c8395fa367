"""The worker supervisor's command-line handling (jury.worker.supervisor)."""

from __future__ import annotations

import os

from jury.worker.supervisor import child_node_name, processes_wanted, take_processes_option


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
