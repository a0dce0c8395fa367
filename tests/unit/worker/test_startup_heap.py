"""A worker freezes the objects of its imports once, out of the garbage collector's sight."""

from __future__ import annotations

import subprocess
import sys


def run_in_a_process_of_its_own(code: str) -> None:
    """The collector's settings last for a process's life: each check gets a fresh one."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_startup_heap_is_frozen_once_per_process() -> None:
    # In a process of its own: freezing is for the rest of a process's life.
    code = (
        "import gc\n"
        "import jury.worker.calls.llm_client\n"
        "from jury.worker.runtime import freeze_startup_heap\n"
        "assert gc.get_freeze_count() == 0\n"
        "frozen = freeze_startup_heap()\n"
        "assert frozen == gc.get_freeze_count() > 100_000, frozen\n"
        "kept = [object() for _ in range(10)]\n"
        "assert freeze_startup_heap() == frozen == gc.get_freeze_count()\n"
    )
    run_in_a_process_of_its_own(code)


def test_a_worker_spaces_its_young_collections() -> None:
    code = (
        "import gc\n"
        "from jury.worker.runtime import YOUNG_COLLECTION_THRESHOLD, space_young_collections\n"
        "before = gc.get_threshold()\n"
        "space_young_collections()\n"
        "after = gc.get_threshold()\n"
        "assert after == (YOUNG_COLLECTION_THRESHOLD, *before[1:]), after\n"
        "assert YOUNG_COLLECTION_THRESHOLD > before[0]\n"
    )
    run_in_a_process_of_its_own(code)
