"""When the producer hands each task to the workers: about when its judge's quota has room.

A judge with an `rpm` starts at most rpm/60 calls a second across the cluster. Queued all at
once, a batch's tasks for it would reach the workers in its first seconds, and every one
whose slot lies beyond the rate horizon would be delivered, prepared and parked again
(jury.broker.parking) to wait for it: thousands of deliveries and rewrites in those seconds,
on the CPU that the calls due then need to leave on time (measured with bench/ratelimit: a
busy start ran the provider at two thirds of its quota for the batch's first seconds, and
each late send is quota lost for good). So the producer parks them itself, each due half a
horizon before the slot the judge's quota would give it were the batch alone on it. The
cluster-wide limiter still decides every call's slot: a task released early (another
batch shares the model, a 429 slowed it) is parked again by its worker, as before.

Parked by the producer is waiting for a slot as parked by a worker is: the task carries when
it was parked, and counts it against the batch's `max_wait_s`. A task that would be parked
longer than that is queued at once instead, for its worker to store as failed
(`wait_limit`), as it did before the producer paced anything.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from jury.schemas.batch import BatchConfig
from jury.schemas.calls import calls_per_task


class PublicationPace:
    """How long to park each of a batch's tasks, judge by judge, in the order they are
    published (a pure schedule with an injectable clock)."""

    def __init__(
        self,
        config: BatchConfig,
        horizon_s: float,
        margin: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        calls = calls_per_task(config)
        # Judges that go through the rate limiter with an rpm; a provider batch's judge does not.
        self.intervals = {
            judge.name: 60 / judge.rpm * (1 + margin) * calls
            for judge in config.panel
            if judge.rpm and not judge.batch_api
        }
        self.horizon_s = horizon_s
        self.max_wait_s = config.max_wait_s
        self.clock = clock
        self.published: Counter[str] = Counter()
        self.started: float | None = None

    def delay_s(self, judge: str) -> float:
        """0: queue the judge's next task now; otherwise park it this many seconds."""
        interval = self.intervals.get(judge)
        if interval is None:
            return 0.0
        now = self.clock()
        if self.started is None:
            self.started = now
        slot_in = self.published[judge] * interval - (now - self.started)
        self.published[judge] += 1
        if slot_in <= self.horizon_s:
            return 0.0
        delay = slot_in - self.horizon_s / 2
        return 0.0 if self.max_wait_s is not None and delay > self.max_wait_s else delay
