"""`python -m tests.adversarial.runner CLASS RESULTS FOLDER`: run every corpus case of one
class in this process, each in a folder of its own, and write one JSON line per case to
RESULTS as soon as it ends: whether it went as expected, its peak of Python allocations
(tracemalloc), its CPU time and its wall time. The process runs under an address-space limit,
so a case that would exhaust the machine fails here instead."""

from __future__ import annotations

import importlib
import json
import os
import resource
import sys
import time
import tracemalloc
from pathlib import Path

from jury.local.services import start_simulator
from jury.simulator.hostile import hostile_options
from tests.adversarial.cases import CASES

MODULES = {
    "scores": "provider_cases",
    "provider": "provider_cases",
    "bounds": "bound_cases",
    "heuristics": "heuristic_cases",
}
ADDRESS_SPACE_LIMIT = 6 * 1024**3


def run_class(klass: str, results: Path, folder: Path) -> None:
    module = importlib.import_module(f"tests.adversarial.{MODULES.get(klass, 'input_cases')}")
    simulator = None
    if klass == "provider":
        from tests.adversarial.provider_cases import TRICKLE_MS

        options = ["--trickle-ms", str(TRICKLE_MS), *hostile_options()]
        (folder / "logs").mkdir(exist_ok=True)
        simulator = start_simulator(folder / "logs", options)
        os.environ["JURY_CORPUS_SIMULATOR_URL"] = simulator.url
        module.warm_up()
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    try:
        with results.open("w") as out:
            for case in (c for c in CASES if c.klass == klass):
                workdir = folder / case.name
                workdir.mkdir()
                tracemalloc.start()
                started, cpu_started = time.perf_counter(), time.process_time()
                try:
                    case.run(workdir)
                    ok, detail = True, ""
                except Exception as exc:  # AssertionError, or whatever the case raised
                    ok, detail = False, f"{type(exc).__name__}: {exc}"[:2000]
                seconds = time.perf_counter() - started
                cpu_seconds = time.process_time() - cpu_started
                peak = tracemalloc.get_traced_memory()[1] / 1024**2
                tracemalloc.stop()
                line = {"name": case.name, "ok": ok, "detail": detail, "peak_mib": peak}
                line |= {"seconds": seconds, "cpu_seconds": cpu_seconds}
                out.write(json.dumps(line) + "\n")
                out.flush()
    finally:
        if simulator is not None:
            simulator.stop(grace=2)


if __name__ == "__main__":
    run_class(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
