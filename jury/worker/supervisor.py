"""One `jury worker` for a host's cores: a process that loads the worker's code once and forks
its worker processes from it, so that they share those pages; then a light supervisor that
keeps them running.

A worker process's memory is mostly code and data loaded at import: `import litellm` alone
is some 190 MB. N separate workers hold N copies. Forked after those imports, N processes
share one copy of every page none of them writes to, as the children of Celery's prefork pool
share their parent's (celery/concurrency/prefork.py, through billiard's fork); counted as PSS,
the host pays for the imports once.

- The preloaded process imports (preload), collects, and freezes its heap (`gc.freeze()`, as
  the gc module's documentation advises before a fork): a child's collections then never
  walk, nor write to, the objects it shares.
- It forks before any thread, event loop or Redis connection exists in it (the check that
  Redis answers closes its connection first): a child starts as a fresh worker would, and
  builds its own. Each child is a whole worker (Celery's consumer, the engine pool,
  heartbeats) with a node name of its own (`-n name@host` becomes `name-1@host`, …).
- Then it execs `python -m jury.worker.supervisor` (same pid, same children), which holds
  none of the preloaded pages: see fork_workers.
- The supervisor waits on signals alone (no polling, no CPU while nothing happens): SIGTERM
  is passed to every worker (Celery's warm shutdown) and it exits once they have; SIGINT
  (Ctrl-C) the same the first time and SIGQUIT (cold) the next; SIGQUIT is passed on as is.
- A worker killed by a signal (SIGKILL, the OOM killer) is replaced at once, or after a pause
  growing to RESTART_MAX_S if it keeps dying young, by a `python -m jury.worker` of its own
  under the same node name; what the dead one held comes back through the heartbeats, as for
  any dead worker (jury.worker.engine.liveness). A worker that exits by itself with a failure
  within STARTUP_S of its start could not start (its log says why): the others are stopped
  and the supervisor exits with its status. One that exits cleanly (a remote `shutdown`) is
  not replaced.
- Each worker asks the kernel for SIGTERM when its supervisor dies (Linux
  `PR_SET_PDEATHSIG`): no worker outlives it.
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
    # Celery's command line (its plugins too: Flower, click-repl), which runs the worker.
    "celery.bin.celery",
    "kombu.pidbox",
    "jury.worker.engine.consumer",
    "sqlite3",
)
# What a worker's first calls import besides, seen in sys.modules of a forked worker after a
# batch (LiteLLM 1.106): loaded by the parent where this LiteLLM has them, skipped otherwise.
PRELOADED_IF_PRESENT = (
    "litellm.llms.edenai.chat.transformation",
    "litellm.llms.edenai.common_utils",
    "litellm.llms.fal_ai.chat.transformation",
    "litellm.llms.fal_ai.cost_calculator",
    "litellm.llms.fal_ai.image_generation.bria_transformation",
    "litellm.llms.fal_ai.image_generation.bytedance_transformation",
    "litellm.llms.fal_ai.image_generation.flux_dev_transformation",
    "litellm.llms.fal_ai.image_generation.flux_pro_v11_transformation",
    "litellm.llms.fal_ai.image_generation.flux_pro_v11_ultra_transformation",
    "litellm.llms.fal_ai.image_generation.flux_schnell_transformation",
    "litellm.llms.fal_ai.image_generation.gpt_image_2_transformation",
    "litellm.llms.fal_ai.image_generation.ideogram_v3_transformation",
    "litellm.llms.fal_ai.image_generation.imagen4_transformation",
    "litellm.llms.fal_ai.image_generation.nano_banana_transformation",
    "litellm.llms.fal_ai.image_generation.recraft_v3_transformation",
    "litellm.llms.fal_ai.image_generation.stable_diffusion_transformation",
    "litellm.llms.fal_ai.image_generation.transformation",
    "litellm.llms.litellm_proxy.chat.transformation",
    "litellm.llms.openai.chat.gpt_audio_transformation",
    "litellm.llms.openai_like.dynamic_config",
    "litellm.llms.vertex_ai.vertex_ai_partner_models.anthropic.output_params_utils",
    "litellm.llms.vertex_ai.vertex_ai_partner_models.anthropic.transformation",
    "litellm.proxy._experimental.mcp_server.stdio_gate",
    "litellm.proxy._types",
    "litellm.proxy.openai_files_endpoints.common_utils",
    "litellm.proxy.types_utils.utils",
    "litellm.types.integrations.compression_interception",
    "litellm.types.object_permission",
    "litellm.types.proxy.carried_budget_state",
    "litellm.types.proxy.control_plane_endpoints",
    "litellm.types.proxy.spend_capture_rate",
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
# Set for a worker started in place of a dead one: its supervisor's pid.
SUPERVISOR_ENV = "JURY_WORKER_SUPERVISOR"


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
    for module in PRELOADED_IF_PRESENT:
        with contextlib.suppress(ImportError):
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


def fork_workers(count: int, run_child: Callable[[int], int], argv: list[str]) -> int:
    """Fork `count` workers from this (preloaded) process, which then becomes their
    supervisor: it runs `python -m jury.worker.supervisor` in its own place (exec), keeping
    its pid and its children. Returns only in a child, with the worker's exit status
    (`run_child(index)`), up to `python -m jury.worker`'s own exit: atexit callbacks run as
    in a single worker.

    Why exec: a page that every child writes to (a refcount, an allocation in a free slot)
    is copied in each of them, and the parent's own copy is then used by nobody; kept, such
    pages were some 50 MB of the parent's PSS. The light supervisor holds none of them."""
    parent = os.getpid()
    # Held from now until the supervisor waits for them: a signal sent meanwhile stays
    # pending, across the exec too (a blocked signal's mask and pending state survive it).
    signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
    adopted = []
    for index in range(1, count + 1):
        pid = os.fork()
        if pid == 0:
            _become_child(parent)
            return run_child(index)
        adopted.append(f"{pid}:{index}")
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    command = [*_python_m(__name__), "--adopt", ",".join(adopted), "--", *argv]
    os.execv(sys.executable, command)
    raise AssertionError("unreachable")  # pragma: no cover


@dataclasses.dataclass
class Supervisor:
    """Keeps `count` workers running: those it adopted (forked by the preloaded process it
    replaced), and any `start(index)` starts in place of one that died."""

    count: int
    start: Callable[[int], int]
    say: Callable[[str], None]
    clock: Callable[[], float] = time.monotonic
    children: dict[int, Child] = dataclasses.field(default_factory=dict)  # by pid
    waiting: list[Child] = dataclasses.field(default_factory=list)  # to be restarted
    stopping: bool = False
    interrupts: int = 0
    failure: int = 0

    def adopt(self, pid: int, index: int) -> None:
        self.children[pid] = Child(index, pid, self.clock())
        self.say(f"worker process {index} of {self.count} started (pid {pid})")

    def run(self) -> int:
        """Wait for signals until every worker has stopped; returns the exit status."""
        signal.signal(signal.SIGCHLD, _ignore)  # blocked; a handler keeps it queued
        signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
        self._reap()  # a child that ended before the exec
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
            if not self.stopping:
                self._restart_due()
        return self.failure

    def _on_signal(self, signo: int) -> None:
        if signo == signal.SIGHUP:
            return  # a closed terminal: the workers go on (Celery's own restart is not ours)
        if signo == signal.SIGINT:
            self.interrupts += 1
            passed = signal.SIGTERM if self.interrupts == 1 else signal.SIGQUIT
        else:
            passed = signal.Signals(signo)
        if not self.stopping:
            self.say(f"{_signal_name(signo)}: stopping {len(self.children)} processes")
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
            how = f"was killed by {_signal_name(os.WTERMSIG(status))}"
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

    def _restart_due(self) -> None:
        """Start the workers whose pause is over."""
        now = self.clock()
        for child in [c for c in self.waiting if (c.restart_at or 0.0) <= now]:
            self.waiting.remove(child)
            pid = self.start(child.index)
            child.pid, child.started, child.restart_at = pid, self.clock(), None
            self.children[pid] = child
            self.say(f"worker process {child.index} of {self.count} started (pid {pid})")


def start_worker_process(index: int, argv: list[str]) -> int:
    """A worker in place of one that died: `python -m jury.worker` as a process of its own
    (it loads its code for itself; the pages its forebear shared are gone with the preloaded
    process), with the dead one's node name, dying with its supervisor."""
    env = {**os.environ, "JURY_WORKER_PROCESSES": "1", SUPERVISOR_ENV: str(os.getpid())}
    command = [*_python_m("jury.worker"), *child_node_name(argv, index)]
    # A spawned process inherits the signal mask: the worker's must be clear.
    return os.posix_spawn(sys.executable, command, env, setsigmask=())


def die_with_supervisor() -> None:
    """In a worker started by start_worker_process: SIGTERM when its supervisor dies."""
    parent = os.environ.pop(SUPERVISOR_ENV, "")
    if parent and parent == str(os.getppid()):
        _die_with_parent(int(parent))


def _python_m(module: str) -> list[str]:
    # As jury.local.services.python_module: `-P` keeps the current folder off sys.path.
    return [sys.executable, "-P", "-m", module]


def main(argv: list[str]) -> int:
    """`python -m jury.worker.supervisor --adopt PID:INDEX,... -- WORKER-ARGS`: the
    supervisor a preloaded `jury worker --processes N` becomes once it has forked."""
    adopted = argv[argv.index("--adopt") + 1].split(",")
    worker_argv = argv[argv.index("--") + 1 :] if "--" in argv else []
    supervisor = Supervisor(
        len(adopted),
        lambda index: start_worker_process(index, worker_argv),
        lambda line: print(f"jury worker: {line}", file=sys.stderr, flush=True),
    )
    for entry in adopted:
        pid, _, index = entry.partition(":")
        supervisor.adopt(int(pid), int(index))
    return supervisor.run()


def _signal_name(signo: int) -> str:
    try:
        return signal.Signals(signo).name
    except ValueError:  # a real-time signal has no name
        return f"signal {signo}"


def _ignore(signum: int, frame: object) -> None:
    """SIGCHLD's handler in the parent (never run: the signal is blocked and waited for)."""


def _become_child(parent: int) -> None:
    """A fresh worker's signal state, and SIGTERM when the parent dies."""
    for signo in _WAITED:
        signal.signal(signo, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    _die_with_parent(parent)
    # Celery restarts a worker on SIGHUP by running its command line again (celery/apps/
    # worker.py, `_reload_current_worker`): one worker process, not another supervisor.
    os.environ["JURY_WORKER_PROCESSES"] = "1"
    sys.argv = take_processes_option(sys.argv)[1]


def _die_with_parent(parent: int) -> None:
    with contextlib.suppress(Exception):  # Linux only; elsewhere an orphan goes on alone
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl: nobody supervises this one
        os._exit(0)


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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
