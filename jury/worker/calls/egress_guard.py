"""The egress policy (jury.schemas.egress) where the worker's requests leave: every request of
every call, redirects and all, is checked here just before it is sent, and sent to the very
address that was checked.

A call states what it carries in a CallGuard (the policy, the variables whose values go with
it, what it is for messages); the HTTP clients find it here: jury's wire
(jury.worker.calls.openai_wire) and every httpx client behind LiteLLM through a context
variable, as the send gate's wait travels (jury.worker.calls.send_wait); the HTTP endpoint
candidates' and the Batch API's clients are given theirs (jury.worker.calls.guarded_transport).

DNS rebinding: a name checked against one answer and connected to through another would let
a batch reach whatever the second answer says. So the checked address is the one connected
to: the request's URL is rewritten to that address (pinned), its `Host` header and its TLS
server name (SNI, hence the certificate's check) keep the name. A name that the operator
allows by name (JURY_EGRESS_ALLOW) is connected to as a name: where it resolves is the
operator's to trust. Answers are cached for RESOLVED_TTL_S, checked once each.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

from jury.errors import EgressRefused, PermanentJudgeError
from jury.schemas.egress import EgressPolicy, ModelCall, refused
from jury.schemas.egress_hosts import Destination, IPAddress, destination, normal_host
from jury.settings import EGRESS_ENV, Settings

# How long a name's checked addresses are used before it is resolved (and checked) again.
RESOLVED_TTL_S: Final = 30.0
REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})
# The most of a redirect's Location shown in its refusal.
LOCATION_CHARS: Final = 200


@dataclass(frozen=True)
class CallGuard:
    """What one call may do: the policy, the variables whose values its requests carry (a
    key, placeholders' values), and what it is, for messages ("judge gpt-4o")."""

    policy: EgressPolicy
    carried: tuple[str, ...] = ()
    what: str = "a call"


_GUARD: ContextVar[CallGuard | None] = ContextVar("jury_egress_guard", default=None)


@contextmanager
def guarding(guard: CallGuard) -> Iterator[None]:
    """Within this block, the requests jury's HTTP clients send are checked against `guard`."""
    token = _GUARD.set(guard)
    try:
        yield
    finally:
        _GUARD.reset(token)


def current_guard() -> CallGuard:
    """The guard of the call sending; outside any call of jury's (none in a worker), this
    process's environment's policy, carrying nothing."""
    return _GUARD.get() or CallGuard(environment_policy())


# (host, port) -> (when the answer expires, its addresses)
_RESOLVED: dict[tuple[str, int], tuple[float, tuple[IPAddress, ...]]] = {}


def _addresses(infos: list[tuple[object, ...]]) -> tuple[IPAddress, ...]:
    from ipaddress import ip_address

    found: dict[IPAddress, None] = {}
    for info in infos:
        sockaddr = info[4]
        assert isinstance(sockaddr, tuple)
        found[ip_address(str(sockaddr[0]))] = None
    return tuple(found)


def _cached(host: str, port: int) -> tuple[IPAddress, ...] | None:
    entry = _RESOLVED.get((host, port))
    return entry[1] if entry is not None and entry[0] > time.monotonic() else None


def _keep(host: str, port: int, addresses: tuple[IPAddress, ...]) -> None:
    if len(_RESOLVED) > 10_000:
        _RESOLVED.clear()
    _RESOLVED[(host, port)] = (time.monotonic() + RESOLVED_TTL_S, addresses)


@functools.lru_cache(maxsize=4096)
def request_destination(guard: CallGuard, scheme: str, host: str, port: int | None) -> Destination:
    """A request's destination as the HTTP client parsed its URL, checked for what the call
    carries and for what can be told without resolving; EgressRefused otherwise. Cached: a
    worker sends hundreds of requests a second to a few hosts, under a few guards."""
    try:
        name, address = normal_host(host)
    except ValueError as exc:
        raise refused(guard.what, str(exc)) from None
    default = 443 if scheme == "https" else 80
    dest = Destination(scheme, name, port or default, address)
    policy = guard.policy
    problem = policy.carried_problem(guard.carried, dest)
    if problem is None and not policy.needs_resolving(dest):
        problem = policy.reach_problem(dest)
    if problem:
        raise refused(guard.what, problem)
    return dest


def _pinned(guard: CallGuard, dest: Destination, addresses: tuple[IPAddress, ...]) -> IPAddress:
    problem = guard.policy.reach_problem(dest, addresses)
    if problem:
        raise refused(guard.what, problem)
    return addresses[0]


async def connect_address(guard: CallGuard, dest: Destination) -> IPAddress | None:
    """The address to connect to for `dest`, checked; None: connect by name (an address
    already, `localhost`, or a name the operator allows as such). OSError when the name does
    not resolve."""
    if not guard.policy.needs_resolving(dest):
        return dest.address
    addresses = _cached(dest.host, dest.port)
    if addresses is None:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(dest.host, dest.port, type=socket.SOCK_STREAM)
        addresses = _addresses(list(infos))
        _keep(dest.host, dest.port, addresses)
    return _pinned(guard, dest, addresses)


def connect_address_sync(guard: CallGuard, dest: Destination) -> IPAddress | None:
    """connect_address, for a blocking client (the Batch API's, in a thread of its own)."""
    if not guard.policy.needs_resolving(dest):
        return dest.address
    addresses = _cached(dest.host, dest.port)
    if addresses is None:
        infos = socket.getaddrinfo(dest.host, dest.port, type=socket.SOCK_STREAM)
        addresses = _addresses(list(infos))
        _keep(dest.host, dest.port, addresses)
    return _pinned(guard, dest, addresses)


def host_header(dest: Destination) -> str:
    """The `Host` header of a request to `dest` (the port only when not the scheme's)."""
    host = f"[{dest.host}]" if ":" in dest.host else dest.host
    default = 443 if dest.scheme == "https" else 80
    return host if dest.port == default else f"{host}:{dest.port}"


def redirect_refused(
    guard: CallGuard, dest: Destination, status: int, location: str
) -> EgressRefused:
    """A redirect is never followed: it could carry the call's key to another host."""
    try:
        shown = destination(location).label if "://" in location else location
    except ValueError:
        shown = location
    return refused(
        guard.what,
        f"{dest.label} answered with a redirect (HTTP {status}) to {shown[:LOCATION_CHARS]!r}: "
        "jury follows no redirect, so that no key reaches another host; point the URL at the "
        "address that answers",
    )


def environment_policy() -> EgressPolicy:
    """The policy of this process's environment (JURY_EGRESS_*, JURY_KEY_HOSTS,
    JURY_PLAIN_VARS): a call made outside a worker's runtime, which passes its own."""
    return _policy_of(tuple(os.environ.get(name, "") for name in EGRESS_ENV.values()))


@functools.lru_cache(maxsize=8)
def _policy_of(values: tuple[str, ...]) -> EgressPolicy:
    return Settings.egress_from_env(dict(zip(EGRESS_ENV.values(), values, strict=True)))


# What an OpenAI-compatible server gets as the key when jury sends none of the workers': the
# OpenAI SDK insists on one, and local servers (vLLM, Ollama, the simulator) ignore it.
PLACEHOLDER_KEY: Final = "no-key-needed"


def call_key(call: ModelCall, api_key_env: str | None, what: str) -> str | None:
    """The key a model call carries, read from the environment at call time, as the policy
    allows it (`call`); None: LiteLLM reads its provider's own, for its own endpoint."""
    if call.key_variable is None:
        return PLACEHOLDER_KEY if call.explicit_key else None
    key = os.environ.get(call.key_variable)
    if key:
        return key
    if api_key_env:
        raise PermanentJudgeError(
            f"environment variable {api_key_env} (api_key_env of {what}) is not set on this worker",
            kind="missing_key",
        )
    return PLACEHOLDER_KEY  # the provider's own variable, unset: the server needs none
