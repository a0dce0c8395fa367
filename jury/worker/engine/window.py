"""How many tasks a worker process holds in flight: a window that adapts to what it sees.

A task's body costs a coroutine while its call waits on the network, so against a slow judge
(a 10 s reasoning model) one process can hold thousands and judge hundreds a second; against
a fast one, or on a busy host, more in flight only adds memory and latency. The controller
decides from what a worker observed over the last interval (pure: no clock, no I/O); the
engine's adapter (jury.worker.engine.pool) observes and applies it to Celery's prefetch window.

- It grows while the window is full, the process has CPU to spare (its CPU time under
  `cpu_low` of a core, its event loop answering within `lag_low_s`), nothing was pushed back,
  and the memory the growth would take, projected from what each call in flight costs now,
  stays under the bound. It doubles up to where CPU pressure last cut it to, and grows by a
  quarter a step beyond (as TCP's slow start and congestion avoidance): a window that found
  its level stays near it instead of swinging by half; after `calm_ticks` quiet steps it
  doubles again.
- It shrinks to `cut` of itself under sustained CPU pressure (`pressure_ticks` intervals at
  `cpu_high` of a core or a loop lagging `lag_high_s`, not counting the `pressure_ticks`
  after a growth, while the calls it let in start at once), or when the provider pushes back
  (`pushback_share` of the tasks that ended were parked for a rate-limit slot or failed on a
  429): never below `start`, the window every worker had before it adapted.
- Over the memory bound (RSS), it is cut to `cut` of the calls in flight, down to `floor`,
  and growth stops there: a process's heap is seldom given back, so its RSS stays high after
  a cut and is read again only when it rises further.
- Never above `ceiling` (JURY_WORKER_CONCURRENCY), never below `floor`.
"""

from __future__ import annotations

from dataclasses import dataclass

GROW = "calls waiting, CPU to spare"
CPU = "CPU pressure"
LAG = "event loop lagging"
MEMORY = "memory over bound"
PUSHBACK = "provider pushing back"


@dataclass(frozen=True)
class WindowLimits:
    ceiling: int
    start: int
    memory_bytes: int
    floor: int = 32
    cpu_low: float = 0.6
    cpu_high: float = 0.9
    lag_low_s: float = 0.05
    lag_high_s: float = 0.25
    pressure_ticks: int = 3
    pushback_share: float = 0.05
    growth: float = 2.0
    # Beyond where pressure last cut the window, it grows by this fraction a step; after
    # `calm_ticks` steps without pressure it doubles again (a burst of calls starting at once
    # lags the loop for a moment, and must not hold the window to small steps for good).
    creep: float = 0.25
    calm_ticks: int = 10
    cut: float = 0.8
    # A window this full (in flight ÷ window) has calls waiting for room.
    full: float = 0.9
    # The least memory a call in flight is reckoned to take: a call's RSS grows for a while
    # after it starts, so what the calls of a window just opened cost looks too small (one
    # worker against the simulator: 75–85 KB each at 2,000 in flight).
    call_bytes: int = 80 * 1024

    @classmethod
    def of(cls, ceiling: int, start: int, memory_bytes: int) -> WindowLimits:
        start = min(start, ceiling)
        return cls(ceiling, start, memory_bytes, min(cls.floor, start))


@dataclass(frozen=True)
class Observation:
    """One interval of a worker process (about a second)."""

    in_flight: int
    cpu_share: float  # process CPU seconds per second of the interval (1.0: one core)
    loop_lag_s: float  # how late the event loop ran a callback handed to it
    rss_bytes: int | None  # None: not known on this platform
    ended: int = 0  # tasks that ended in the interval
    pushed_back: int = 0  # of them, parked for a rate-limit slot or failed on a 429


@dataclass
class WindowController:
    limits: WindowLimits
    window: int = 0
    reason: str = ""
    _pressed: int = 0
    _idle_rss: int | None = None
    _memory_cap: int | None = None
    _rss_at_cut: int = 0
    _level: int | None = None  # where CPU pressure or lag last cut the window to
    _calm: int = 0
    _settling: int = 0  # intervals after a growth that are not pressure

    def __post_init__(self) -> None:
        self.window = self.window or self.limits.start

    def decide(self, seen: Observation) -> int:
        """The window after `seen`; `reason` says why it changed (unchanged: kept)."""
        limits = self.limits
        if seen.rss_bytes is not None and (self._idle_rss is None or seen.in_flight == 0):
            self._idle_rss = min(self._idle_rss or seen.rss_bytes, seen.rss_bytes)
        before = self.window
        if self._over_memory(seen):
            self._cut_for_memory(seen)
        elif seen.ended and seen.pushed_back >= limits.pushback_share * seen.ended:
            self._shrink(PUSHBACK, limits.start)
        elif self._pressure(seen):
            self._shrink(LAG if seen.loop_lag_s >= limits.lag_high_s else CPU, limits.start)
            self._level = self.window
        elif self._may_grow(seen):
            self.window = min(self._room(seen), self._grown(before))
            self.reason = GROW
            self._settling = limits.pressure_ticks
        self.window = max(limits.floor, min(limits.ceiling, self.window))
        return self.window

    def _grown(self, window: int) -> int:
        limits, level = self.limits, self._level
        if level is None or window * limits.growth <= level:
            return max(window + 1, round(window * limits.growth))
        if window < level:  # below it for another reason (push-back, memory)
            return level
        return max(window + 1, round(window * (1 + limits.creep)))

    def _over_memory(self, seen: Observation) -> bool:
        rss = seen.rss_bytes
        if rss is None or rss <= self.limits.memory_bytes:
            return False
        # Cut once for an RSS; again only if it rose since (the heap is seldom given back).
        return self._memory_cap is None or rss > self._rss_at_cut + self.limits.memory_bytes // 50

    def _cut_for_memory(self, seen: Observation) -> None:
        held = min(self.window, max(seen.in_flight, self.limits.floor))
        self.window = max(self.limits.floor, int(held * self.limits.cut))
        self._memory_cap = self.window
        self._rss_at_cut = seen.rss_bytes or 0
        self.reason = MEMORY

    def _shrink(self, reason: str, lowest: int) -> None:
        if self.window > lowest:
            self.window = max(lowest, int(self.window * self.limits.cut))
            self.reason = reason
        self._pressed = 0

    def _pressure(self, seen: Observation) -> bool:
        limits = self.limits
        pressed = seen.cpu_share >= limits.cpu_high or seen.loop_lag_s >= limits.lag_high_s
        self._calm = 0 if pressed else self._calm + 1
        if self._calm >= limits.calm_ticks:
            self._level = None
        if self._settling:
            self._settling -= 1
            pressed = False
        self._pressed = self._pressed + 1 if pressed else 0
        return self._pressed >= limits.pressure_ticks

    def _may_grow(self, seen: Observation) -> bool:
        limits = self.limits
        return (
            self.window < limits.ceiling
            and seen.in_flight >= limits.full * self.window
            and seen.cpu_share < limits.cpu_low
            and seen.loop_lag_s < limits.lag_low_s
            and seen.pushed_back == 0
        )

    def _room(self, seen: Observation) -> int:
        """The largest window memory allows: the cap of the last memory cut, and half the
        calls the memory left under the bound would hold at what a call costs (what the
        calls in flight cost each now, at least `call_bytes`): the window closes in on the
        bound as RSS, which lags the calls, catches up."""
        room = self.limits.ceiling if self._memory_cap is None else self._memory_cap
        rss, idle = seen.rss_bytes, self._idle_rss
        if rss is None or idle is None:
            return room
        per_call = max(self.limits.call_bytes, (rss - idle) // max(1, seen.in_flight))
        spare = max(0, self.limits.memory_bytes - rss)
        return max(self.window, min(room, seen.in_flight + spare // per_call // 2))
