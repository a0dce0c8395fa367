"""A worker's start, said in one paragraph: the broker it was given, and waiting for it.

Before Celery starts, `jury worker` checks that its broker is Redis: anything else (amqp://, a
scheme nobody knows) is refused at once, in one paragraph, and the process exits 2. Then it
waits for Redis to answer: while it does not, one line per attempt says so, naming the URL and
where it came from (JURY_BROKER_URL, or the default when that is unset), attempts spaced from
1 s to RETRY_MAX_S apart, for at most JURY_BROKER_WAIT seconds (default 120) from the first;
then one paragraph, and the process exits 1. A worker never runs without its broker, and
never logs a traceback for one missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from jury.broker.redis_client import BrokerRedis, broker_kind_problem
from jury.errors import ConfigurationError
from jury.settings import Settings

EXIT_BAD_BROKER = 2
EXIT_NO_BROKER = 1
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 10.0
# Each attempt waits this long for Redis to answer.
ATTEMPT_TIMEOUT_S = 5.0


def check_broker_kind(settings: Settings) -> str | None:
    """The paragraph refusing a broker that is not Redis, or None."""
    return broker_kind_problem(settings.broker_url, settings.broker_url_source())


def wait_for_broker(
    settings: Settings,
    say: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Wait until Redis answers (None), saying so in one line per failed attempt; or, once
    JURY_BROKER_WAIT has passed, the paragraph saying the worker gives up."""
    limit = settings.broker_wait_s
    deadline = clock() + limit
    # One connection attempt per call (kombu's own retries would hide attempts for seconds,
    # connection.py: _extract_failover_opts); the spacing is ours.
    options = {**settings.broker_transport_options, "max_retries": 0}
    once = settings.model_copy(update={"broker_transport_options": options})
    delay = RETRY_FIRST_S
    attempt = 0
    while True:
        attempt += 1
        try:
            BrokerRedis.from_settings(once, socket_timeout=ATTEMPT_TIMEOUT_S).close()
            return None
        except ConfigurationError as exc:
            problem = str(exc)
        left = deadline - clock()
        if left <= 0:
            return (
                f"{problem} Gave up after {attempt} attempts in {limit:g} s (JURY_BROKER_WAIT "
                "says how long a starting worker waits for Redis)."
            )
        wait = min(delay, left)
        say(f"{problem} Attempt {attempt}; trying again in {wait:.0f} s, for {left:.0f} s more.")
        sleep(wait)
        delay = min(RETRY_MAX_S, delay * 2)
