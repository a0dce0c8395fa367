"""The simulator's hostile options: parsed from the command line, chosen per model, and
bodies that are as broken as they claim."""

from __future__ import annotations

import json
import random

import pytest

from jury.simulator.answers import chat_completion
from jury.simulator.config import parse_config
from jury.simulator.hostile import HOSTILE_KINDS, hostile_body, hostile_options


def test_options_choose_kinds_per_model_or_persona() -> None:
    config = parse_config(
        ["--hostile", "balanced@x=trickle", "--hostile", "balanced@x=negative-usage",
         "--hostile", "strict=garbage-bytes", "--trickle-ms", "5"]
    )  # fmt: skip
    assert config.hostile_for("balanced@x", "balanced") == {"trickle", "negative-usage"}
    assert config.hostile_for("strict@any", "strict") == {"garbage-bytes"}
    assert config.hostile_for("balanced", "balanced") == frozenset()
    assert config.trickle_ms == 5
    every = parse_config(hostile_options())
    assert {kind for kinds in every.hostile.values() for kind in kinds} == set(HOSTILE_KINDS)


def test_an_unknown_kind_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_config(["--hostile", "balanced=explode"])
    assert "KIND one of trickle" in capsys.readouterr().err


def payload() -> dict[str, object]:
    return chat_completion("m", '{"score": 3}', "prompt text")


def test_bodies_are_broken_as_they_claim() -> None:
    rng = random.Random(0)
    with pytest.raises(UnicodeDecodeError):
        hostile_body(frozenset({"invalid-utf8"}), payload(), rng).decode("utf-8")
    assert len(hostile_body(frozenset({"garbage-bytes"}), payload(), rng)) == 512
    usage = json.loads(hostile_body(frozenset({"negative-usage"}), payload(), rng))["usage"]
    assert usage["prompt_tokens"] < 0 and usage["completion_tokens"] < 0
    assert "usage" not in json.loads(hostile_body(frozenset({"missing-usage"}), payload(), rng))
    fractional = json.loads(hostile_body(frozenset({"fractional-usage"}), payload(), rng))
    assert fractional["usage"]["prompt_tokens"] == 10.5
