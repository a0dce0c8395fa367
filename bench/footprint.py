"""What a run costs the machine: the CPU seconds and the peak memory (PSS, proportional set
size: pages shared between processes counted once in all) of every jury process, sampled in
a thread while the run goes on."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import psutil
import redis

MB = 1024 * 1024


def tree(pid: int) -> list[psutil.Process]:
    """A process and its live children (a worker's heuristic processes, a prefork's pool)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of a process and its live children."""
    total = 0.0
    for process in tree(pid):
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def pss_bytes(pid: int) -> int:
    """A process's PSS, from /proc/PID/smaps_rollup (one line to read, where psutil's
    memory_full_info parses the whole smaps: far more CPU on the host being measured)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(psutil.Process(pid).memory_full_info().pss)
    except (psutil.Error, AttributeError):
        return 0


def tree_pss_bytes(pid: int) -> int:
    return sum(pss_bytes(p.pid) for p in tree(pid))


class Footprint:
    """Per named process (and its children): CPU seconds from `start` to `stop`, and the
    peak PSS; and the peak of their sum, sampled every `interval_s`."""

    def __init__(self, processes: dict[str, int], interval_s: float = 0.5) -> None:
        self.pids = dict(processes)
        self.interval_s = interval_s
        self.cpu_start: dict[str, float] = {}
        self.cpu_s: dict[str, float] = {}
        self.peak: dict[str, int] = {}
        self.peak_sum = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)

    def start(self) -> None:
        self.cpu_start = {name: tree_cpu_s(pid) for name, pid in self.pids.items()}
        self._thread.start()

    def add(self, name: str, pid: int) -> None:
        """A process that starts during the run (a `jury submit`): its CPU counts from 0, and
        is given at its end (`ended`) if it ends first."""
        with self._lock:
            self.pids[name] = pid
            self.cpu_start[name] = 0.0

    def ended(self, name: str, cpu_s: float) -> None:
        """A process of the run ended: its CPU seconds, from its exit status (os.wait4)."""
        with self._lock:
            self.cpu_s[name] = cpu_s
            self.pids.pop(name, None)

    def stop(self) -> dict[str, Any]:
        self._stopped.set()
        self._thread.join()
        self._sample()
        with self._lock:
            for name, pid in self.pids.items():
                self.cpu_s[name] = tree_cpu_s(pid) - self.cpu_start.get(name, 0.0)
        return {
            "cpu_s": {name: round(value, 3) for name, value in self.cpu_s.items()},
            "cpu_s_total": round(sum(self.cpu_s.values()), 3),
            "peak_pss_mb": {name: round(value / MB, 1) for name, value in self.peak.items()},
            "peak_pss_mb_sum": round(self.peak_sum / MB, 1),
        }

    def _sample_until_stopped(self) -> None:
        while not self._stopped.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        with self._lock:
            pids = dict(self.pids)
        now = {name: tree_pss_bytes(pid) for name, pid in pids.items()}
        with self._lock:
            for name, value in now.items():
                self.peak[name] = max(self.peak.get(name, 0), value)
            self.peak_sum = max(self.peak_sum, sum(now.values()))


def wait_cpu_s(process: Any) -> float:
    """Wait for a child (a subprocess.Popen) to end; its CPU seconds (user + system)."""
    _pid, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return float(usage.ru_utime + usage.ru_stime)


class RedisCommands:
    """The commands a Redis server ran since this was made (INFO commandstats), per command,
    those of INFO itself left out."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.before = self._counts()

    def _counts(self) -> dict[str, int]:
        stats = self.client.info("commandstats")
        return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}

    def since(self) -> dict[str, int]:
        after = self._counts()
        delta = {
            name: calls - self.before.get(name, 0) - (1 if name == "info" else 0)
            for name, calls in after.items()
        }
        self.client.close()
        return dict(sorted(((n, c) for n, c in delta.items() if c > 0), key=lambda kv: -kv[1]))
