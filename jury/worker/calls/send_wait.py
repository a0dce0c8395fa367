"""A call's last wait, run at the HTTP send itself.

The send gate (jury.worker.limits.gating) spaces a model's calls where the provider counts them: at
the moment each request leaves. Passed before LiteLLM builds the request, a call still has
LiteLLM's own work ahead of it (a few milliseconds, far more on a starved event loop), and
calls that passed the gate evenly reached a one-second provider window together. So the
gate's wait travels with the call in a context variable, and the HTTP client's request hook
(jury.worker.calls.llm_client) runs it just before the request is written.

Context variables follow the awaits of one task, and are copied into the tasks and executor
calls LiteLLM starts on the way, so the hook sees the wait of the call that sends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

SendWait = Callable[[], Awaitable[None]]


class _Pending:
    """One call's wait at its send, run once: a redirected request is not gated again."""

    __slots__ = ("ran", "wait")

    def __init__(self, wait: SendWait) -> None:
        self.wait = wait
        self.ran = False


_AT_SEND: ContextVar[_Pending | None] = ContextVar("jury_wait_at_send", default=None)


@contextmanager
def waiting_at_send(wait: SendWait) -> Iterator[None]:
    """Within this block, the next HTTP request sent runs `wait` first (once)."""
    token = _AT_SEND.set(_Pending(wait))
    try:
        yield
    finally:
        _AT_SEND.reset(token)


def pending_wait() -> SendWait | None:
    """The wait the caller left for this call's send, if it has not run yet."""
    pending = _AT_SEND.get()
    return pending.wait if pending is not None and not pending.ran else None


async def at_http_send(request: Any) -> None:
    """The HTTP client's request hook (httpx `event_hooks["request"]`)."""
    pending = _AT_SEND.get()
    if pending is not None and not pending.ran:
        pending.ran = True
        await pending.wait()
