"""`jury submit`'s preview of the workers' egress policy (jury.batchfile.egress_check): every
call a batch describes, checked as a worker would, with names resolved by a fake resolver."""

from __future__ import annotations

import ipaddress

from jury.batchfile.egress_check import egress_problems
from jury.schemas.batch import BatchConfig
from jury.schemas.egress import EgressPolicy
from jury.schemas.egress_hosts import IPAddress

ANSWERS = {
    "gpu-box.internal": ("10.0.0.5",),
    "rebind.example": ("93.184.216.34", "127.0.0.1"),
    "public.example": ("93.184.216.34",),
}


def resolve(host: str, port: int) -> tuple[IPAddress, ...] | None:
    found = ANSWERS.get(host)
    return tuple(ipaddress.ip_address(a) for a in found) if found else None


def config(judges: list[dict[str, object]], **extra: object) -> BatchConfig:
    return BatchConfig.model_validate({"judges": judges, "dimensions": ["relevance"], **extra})


def problems(batch: BatchConfig, policy: EgressPolicy, env: dict[str, str]) -> list[str]:
    return egress_problems(batch, policy, env, resolve)


def test_names_are_judged_by_what_they_resolve_to_and_an_unknown_name_is_left_to_workers() -> None:
    batch = config(
        [
            {"model": "openai/a", "api_base": "http://gpu-box.internal:8000/v1"},
            {"model": "openai/b", "api_base": "http://rebind.example/v1"},
            {"model": "openai/c", "api_base": "http://public.example/v1"},
            {"model": "openai/d", "api_base": "http://nowhere.example/v1"},
            {"model": "openai/e", "api_base": "http://127.0.0.1:9/v1", "enabled": False},
        ]
    )
    found = problems(batch, EgressPolicy(), {})
    assert len(found) == 2, found
    assert found[0].startswith("judges[0] (openai/a): api_base: refused")
    assert "gpu-box.internal (at 10.0.0.5) is a private address" in found[0]
    assert "JURY_EGRESS_ALLOW=gpu-box.internal:8000" in found[0]
    assert "rebind.example (at 127.0.0.1) is a loopback address" in found[1]
    allowed = EgressPolicy.build(allow="gpu-box.internal:8000 127.0.0.0/8")
    assert problems(batch, allowed, {}) == []


def test_keys_and_placeholders_are_checked_and_their_values_never_shown() -> None:
    env = {"SECRET_HOST": "sk-secret-host-value.example", "WHICH": "HOME"}
    batch = config(
        [
            {"model": "openai/a", "name": "a", "api_base": "http://${SECRET_HOST}/v1"},
            {"model": "openai/b", "name": "b", "api_key_env": "${WHICH}"},
            {"model": "openai/c", "name": "c", "api_key_env": "OPENAI_API_KEY"},
        ]
    )
    found = problems(batch, EgressPolicy(), env)
    assert len(found) == 2, found
    assert "${SECRET_HOST} would send" in found[0] and "sk-secret-host-value" not in found[0]
    assert "judges[1] (b)" in found[1] and "HOME is not a key variable" in found[1]
    plain = EgressPolicy.build(plain_vars="SECRET_HOST")
    assert [p[:14] for p in problems(batch, plain, env)] == ["judges[1] (b):"]


def test_candidates_are_checked_as_judges_are() -> None:
    batch = config(
        [{"model": "openai/x", "api_base": "https://api.openai.com/v1"}],
        candidates=[
            {"name": "bot", "url": "http://10.1.2.3/answer"},
            {"name": "model", "model": "openai/y", "api_base": "http://127.0.0.1:8000/v1"},
            {"name": "keyed", "url": "https://public.example/a", "headers": {"X": "${TOKEN}"}},
        ],
    )
    found = problems(batch, EgressPolicy(), {"TOKEN": "t0ken-value-123"})
    assert [p.split(":")[0] for p in found] == [
        "candidates[0] (bot)",
        "candidates[1] (model)",
        "candidates[2] (keyed)",
    ]
    assert "TOKEN" in found[2] and "t0ken-value-123" not in found[2]
