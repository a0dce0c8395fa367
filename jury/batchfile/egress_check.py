"""The workers' egress policy (jury.schemas.egress), checked at `jury submit` and `--dry-run`
with the policy of the submitting machine's environment: the usual mistake (a judge pointed
at a local server not allowed yet, a key named for a host it may not go to, `api_key_env:
HOME`) is refused before anything is enqueued, with the paragraph a worker would store.

The workers check again at every request, against their own settings: what this finds is a
preview, sure only where the producer and the workers share their settings (jury demo,
Docker Compose, one machine). A name is resolved here only to warn early: one that does not
resolve (or not within RESOLVE_TIMEOUT_S) is left to the workers.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Final

from jury.batchfile.model_catalog import model_provider
from jury.errors import EgressRefused
from jury.schemas.batch import BatchConfig, Judge
from jury.schemas.candidates import LLMCandidate, endpoint_variables
from jury.schemas.egress import (
    EgressPolicy,
    plan_endpoint_call,
    plan_model_call,
    refused,
)
from jury.schemas.egress_hosts import Destination, IPAddress
from jury.schemas.placeholders import (
    PlaceholderError,
    expand_fields,
    expand_text,
    redact,
    taken_variables,
)

RESOLVE_TIMEOUT_S: Final = 2.0
Resolve = Callable[[str, int], tuple[IPAddress, ...] | None]


def resolve_briefly(host: str, port: int) -> tuple[IPAddress, ...] | None:
    """The addresses `host` resolves to, or None when it does not within RESOLVE_TIMEOUT_S
    (a resolver thread left behind is a daemon: it never holds the process)."""
    found: list[tuple[IPAddress, ...]] = []

    def lookup() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            return
        found.append(tuple(ipaddress.ip_address(str(info[4][0])) for info in infos))

    thread = threading.Thread(target=lookup, name="jury-egress-resolve", daemon=True)
    thread.start()
    thread.join(RESOLVE_TIMEOUT_S)
    return found[0] if found else None


def _reach(policy: EgressPolicy, what: str, dest: Destination | None, resolve: Resolve) -> None:
    """EgressRefused when `dest`'s name resolves, here, to an address it may not reach."""
    if dest is None or not policy.needs_resolving(dest):
        return
    addresses = resolve(dest.host, dest.port)
    problem = policy.reach_problem(dest, addresses) if addresses else None
    if problem:
        raise refused(what, problem)


def _model_problem(
    policy: EgressPolicy,
    what: str,
    model: Judge | LLMCandidate,
    env: Mapping[str, str],
    resolve: Resolve,
) -> str | None:
    placeholders = (*taken_variables(model.model, env), *taken_variables(model.api_base, env))
    try:
        expanded, secrets = expand_fields(model, env)
    except PlaceholderError:
        return None
    try:
        provider = model_provider(expanded.model)
        call = plan_model_call(
            policy, what, provider, expanded.api_base, expanded.api_key_env, placeholders
        )
        dest = call.destination if model.api_base else None  # a provider's own: the workers'
        _reach(policy, f"{what}: api_base", dest, resolve)
    except EgressRefused as exc:
        # A host may be a placeholder's value: never echoed.
        return redact(str(exc), secrets)
    return None


def egress_problems(
    config: BatchConfig,
    policy: EgressPolicy,
    env: Mapping[str, str] | None = None,
    resolve: Resolve = resolve_briefly,
) -> list[str]:
    """Every call of the batch the policy would refuse, one paragraph each. A placeholder
    that does not expand is left to the placeholder check (jury.batchfile.loading)."""
    env = os.environ if env is None else env
    problems: list[str | None] = [
        _model_problem(policy, f"judges[{n}] ({judge.name})", judge, env, resolve)
        for n, judge in enumerate(config.judges)
        if judge.enabled and judge.heuristic is None
    ]
    for n, candidate in enumerate(config.candidates):
        what = f"candidates[{n}] ({candidate.name})"
        if isinstance(candidate, LLMCandidate):
            problems.append(_model_problem(policy, what, candidate, env, resolve))
            continue
        try:
            url, secrets = expand_text(candidate.url, env)
        except PlaceholderError:
            continue
        try:
            dest = plan_endpoint_call(policy, what, url, endpoint_variables(candidate, env))
            _reach(policy, what, dest, resolve)
        except EgressRefused as exc:
            problems.append(redact(str(exc), secrets))
    return [problem for problem in problems if problem]
