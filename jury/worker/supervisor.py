"""One `jury worker` for a host's cores: a parent that loads the worker's code once and forks
its worker processes from it, so that they share those pages, and keeps them running.

A worker process's memory is mostly code and data loaded at import: `import litellm` alone
is some 190 MB. N separate workers hold N copies. Forked after
those imports, N processes share one copy of every page none of them writes to, as the
children of Celery's prefork pool share their parent's (celery/concurrency/prefork.py, through
billiard's fork); counted as PSS, the host pays for the imports once.

- The parent imports (preload), collects, and freezes its heap (`gc.freeze()`): a child's
  collections then never walk, nor write to, the objects it shares.
- It forks before any thread, event loop or Redis connection exists in it (the check that
  Redis answers closes its connection first): a child starts as a fresh worker would, and
  builds its own.
- Each child is a whole worker (Celery's consumer, the engine pool, heartbeats), with a node
  name of its own.
- The parent waits on signals alone (no polling): SIGTERM is passed to every child (Celery's
  warm shutdown) and the parent exits once they have; SIGINT (Ctrl-C) the same the first time
  and SIGQUIT (cold) the next; SIGQUIT is passed on as is.
- A child killed by a signal (SIGKILL, the OOM killer) is replaced at once, or after a pause
  growing to RESTART_MAX_S if it keeps dying young; what it held comes back through the
  heartbeats, as for any dead worker (jury.worker.engine.liveness). A child that exits by
  itself with a failure within STARTUP_S of its start could not start (its log says why):
  the others are stopped and the parent exits with its code. One that exits cleanly (a
  remote `shutdown`) is not replaced.
- A child asks the kernel for SIGTERM when its parent dies (Linux `PR_SET_PDEATHSIG`): no
  worker outlives its supervisor.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import gc
import importlib
import os
import signal
import sys
import time
from collections.abc import Callable

# Loaded by the parent before the fork: what every worker process imports anyway, by the time
# it takes its first task (the heavy part: LiteLLM and the OpenAI SDK's resources; the rest is
# Celery's worker and jury's).
PRELOADED = (
    "celery.apps.worker",
    "celery.worker.consumer",
    "celery.worker.strategy",
    "kombu.transport.redis",
    "jury.worker.app",
    "jury.worker.engine.pool",
    "jury.worker.calls.llm_client",
    "openai.resources",
)
# A child that fails by itself within this many seconds of its start could not start.
STARTUP_S = 20.0
# A child that died younger than this is replaced after a pause, doubled each time up to
# RESTART_MAX_S (a child that keeps dying must not make the host fork in a loop).
RESTART_QUICK_S = 10.0
RESTART_FIRST_S = 1.0
RESTART_MAX_S = 30.0
_WAITED = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGHUP}
_PR_SET_PDEATHSIG = 1


def processes_wanted(setting: int) -> int:
    """JURY_WORKER_PROCESSES as a count: 0 is one per core this process may run on."""
    if setting > 0:
        return setting
    with contextlib.suppress(AttributeError):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def preload() -> int:
    """Import what every worker process needs, then freeze the heap; returns the number of
    objects frozen."""
    for module in PRELOADED:
        importlib.import_module(module)
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


@dataclasses.dataclass
class Child:
    index: int
    pid: int = 0
    started: float = 0.0
    pause_s: float = 0.0  # the pause before the next restart, if it dies young
    restart_at: float | None = None


@dataclasses.dataclass
class Supervisor:
    """Forks `count` workers and keeps them running. `run_child(index)` is the worker's
    body, run in the child; its return value is the child's exit code."""

    count: int
    run_child: Callable[[int], int]
    say: Callable[[str], None]
    clock: Callable[[], float] = time.monotonic
    children: dict[int, Child] = dataclasses.field(default_factory=dict)  # by pid
    waiting: list[Child] = dataclasses.field(default_factory=list)  # to be restarted
    stopping: bool = False
    interrupts: int = 0
    failure: int = 0

    def run(self) -> int:
        """The parent's loop; returns its exit code. In a child it returns the child's."""
        signal.signal(signal.SIGCHLD, _ignore)  # blocked below; a handler keeps it queued
        signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
        for index in range(1, self.count + 1):
            if self._fork(Child(index)):
                return self._child_body()
        while self.children or (self.waiting and not self.stopping):
            due = min((c.restart_at or 0.0 for c in self.waiting), default=None)
            timeout = None if due is None else max(0.0, due - self.clock())
            info = (
                signal.sigwaitinfo(_WAITED)
                if timeout is None
                else signal.sigtimedwait(_WAITED, timeout)
            )
            if info is not None and info.si_signo != signal.SIGCHLD:
                self._on_signal(info.si_signo)
            self._reap()
            if not self.stopping and self._restart_due():
                return self._child_body()
        return self.failure

    # In the child, fork() returns into run(), which returns the worker's exit code up to
    # `python -m jury.worker`'s own exit: atexit callbacks run as in a single worker.
    child_index: int = 0

    def _child_body(self) -> int:
        return self.run_child(self.child_index)

    def _fork(self, child: Child) -> bool:
        """Start `child`; True in the child process itself."""
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            _become_child(parent)
            self.child_index = child.index
            return True
        child.pid, child.started, child.restart_at = pid, self.clock(), None
        self.children[pid] = child
        self.say(f"worker process {child.index} of {self.count} started (pid {pid})")
        return False

    def _on_signal(self, signo: int) -> None:
        if signo == signal.SIGHUP:
            return  # a closed terminal: the workers go on (Celery's own restart is not ours)
        if signo == signal.SIGINT:
            self.interrupts += 1
            passed = signal.SIGTERM if self.interrupts == 1 else signal.SIGQUIT
        else:
            passed = signal.Signals(signo)
        if not self.stopping:
            self.say(f"{signal.Signals(signo).name}: stopping {len(self.children)} processes")
        self._stop(passed)

    def _stop(self, passed: signal.Signals) -> None:
        self.stopping = True
        self.waiting.clear()
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, passed)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is not None:
                self._ended(child, status)

    def _ended(self, child: Child, status: int) -> None:
        lived = self.clock() - child.started
        name = f"worker process {child.index} (pid {child.pid})"
        if os.WIFSIGNALED(status):
            how = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
            code = 128 + os.WTERMSIG(status)
        else:
            code = os.waitstatus_to_exitcode(status)
            how = f"exited with status {code}"
        if self.stopping:
            if code and not os.WIFSIGNALED(status):
                self.failure = self.failure or code
            return
        if not os.WIFSIGNALED(status):
            if code == 0:
                self.say(f"{name} {how}: not replaced")
                return
            if lived < STARTUP_S:
                self.say(f"{name} {how} {lived:.0f} s after its start: stopping the others")
                self.failure = code
                self._stop(signal.SIGTERM)
                return
        young = lived < RESTART_QUICK_S
        child.pause_s = min(RESTART_MAX_S, child.pause_s * 2 or RESTART_FIRST_S) if young else 0
        child.restart_at = self.clock() + child.pause_s
        self.waiting.append(child)
        after = f" in {child.pause_s:.0f} s" if child.pause_s else ""
        self.say(f"{name} {how}: starting another{after}")

    def _restart_due(self) -> bool:
        """Fork the children whose pause is over; True in a new child."""
        now = self.clock()
        for child in [c for c in self.waiting if (c.restart_at or 0.0) <= now]:
            self.waiting.remove(child)
            if self._fork(child):
                return True
        return False


def _ignore(signum: int, frame: object) -> None:
    """SIGCHLD's handler in the parent (never run: the signal is blocked and waited for)."""


def _become_child(parent: int) -> None:
    """A fresh worker's signal state, and SIGTERM when the parent dies."""
    for signo in _WAITED:
        signal.signal(signo, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    with contextlib.suppress(Exception):  # Linux only; elsewhere an orphan goes on alone
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl: nobody supervises this one
        os._exit(0)
    # Celery restarts a worker on SIGHUP by running its command line again (celery/apps/
    # worker.py, `_reload_current_worker`): one worker process, not another supervisor.
    os.environ["JURY_WORKER_PROCESSES"] = "1"
    sys.argv = take_processes_option(sys.argv)[1]


def take_processes_option(argv: list[str]) -> tuple[str | None, list[str]]:
    """`--processes N` (or `--processes=N`) out of a worker's command line: N (the last one
    given, or None) and the rest, which goes to `celery worker`."""
    value: str | None = None
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--processes":
            value = next(args, "")
        elif arg.startswith("--processes="):
            value = arg.partition("=")[2]
        else:
            rest.append(arg)
    return value, rest


def child_node_name(argv: list[str], index: int) -> list[str]:
    """The command line of worker process `index` of several: a node name given with -n or
    --hostname gets `-<index>` before its `@` (Celery's remote control, Flower and a ping
    tell workers apart by that name); without one, the default names each by its pid."""
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg in ("-n", "--hostname"):
            out += [arg, _numbered(next(args, ""), index)]
        elif arg.startswith("--hostname="):
            out += ["--hostname", _numbered(arg.partition("=")[2], index)]
        elif arg.startswith("-n") and not arg.startswith("--"):
            out += ["-n", _numbered(arg[2:].removeprefix("="), index)]
        else:
            out.append(arg)
    return out


def _numbered(name: str, index: int) -> str:
    left, at, host = name.partition("@")
    return f"{left}-{index}{at}{host}"
