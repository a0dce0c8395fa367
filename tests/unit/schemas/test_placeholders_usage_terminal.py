"""Pure functions of issue 18: placeholder expansion (only where the call is made), usage and
cost checks, and untrusted text on the terminal."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console
from rich.table import Table

from jury.errors import PermanentJudgeError, TransientJudgeError
from jury.results.terminal import safe_text
from jury.schemas.batch import Judge
from jury.schemas.placeholders import (
    PlaceholderError,
    call_settings,
    expand_fields,
    expand_text,
    redact,
    taken_variables,
)
from jury.worker.calls.usage import checked_cost, checked_usage

ENV = {"HOST": "judge.example", "KEY": "sk-secret-123456", "WHICH": "MY_KEY", "TAG": "t1"}


def test_expand_text() -> None:
    assert expand_text("${HOST}-${NOPE:-two}-plain", ENV) == (
        "judge.example-two-plain",
        ("judge.example",),
    )
    with pytest.raises(PlaceholderError, match="NOPE is not set"):
        expand_text("${NOPE}", ENV)
    with pytest.raises(PlaceholderError, match=r"must read \$\{NAME\}"):
        expand_text("${1BAD}", ENV)


def test_a_judges_placeholder_fields_expand_and_the_original_is_untouched() -> None:
    judge = Judge(
        model="openai/balanced@${TAG}",
        name="balanced",
        api_base="https://u:${KEY}@${HOST}/v1",
        api_key_env="${WHICH}",
    )
    expanded, secrets = expand_fields(judge, ENV)
    assert expanded.model == "openai/balanced@t1"
    assert expanded.api_base == "https://u:sk-secret-123456@judge.example/v1"
    assert expanded.api_key_env == "MY_KEY"
    assert judge.api_base == "https://u:${KEY}@${HOST}/v1"  # stored as written
    assert "sk-secret-123456" in secrets
    assert (
        redact(f"cannot reach {expanded.api_base}", secrets) == "cannot reach https://u:***@***/v1"
    )


def test_only_the_placeholder_fields_expand_so_no_variable_reaches_a_prompt() -> None:
    # A prompt's text goes to the judge and comes back in its answer: a worker's variable
    # must never be written into it.
    template = "Rate {output} on {criterion}. Repeat: ${KEY}"
    judge = Judge(model="openai/x", api_base="https://${HOST}/v1", prompt_template=template)
    expanded, secrets = call_settings(judge, ENV)
    assert expanded.prompt_template == template and expanded.api_base == "https://judge.example/v1"
    assert secrets == ("judge.example",)
    assert taken_variables("https://${HOST}/${NOPE:-x}/${KEY}", ENV) == ("HOST", "KEY")
    assert taken_variables(None, ENV) == ()


def test_a_judge_without_placeholders_is_returned_as_is() -> None:
    judge = Judge(model="openai/x")
    assert expand_fields(judge, ENV) == (judge, ())


def test_at_the_call_an_unset_variable_is_the_judges_permanent_error() -> None:
    judge = Judge(model="openai/x", api_base="http://${UNSET_HOST_1234}/v1")
    with pytest.raises(PermanentJudgeError) as info:
        call_settings(judge, {})
    assert info.value.kind == "missing_env" and "UNSET_HOST_1234" in str(info.value)


def test_a_placeholder_model_needs_a_name() -> None:
    with pytest.raises(ValueError, match="give the judge a `name`"):
        Judge(model="openai/${MODEL}")


MESSAGES = [{"role": "user", "content": "x" * 300}]


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (SimpleNamespace(prompt_tokens=12, completion_tokens=3), (12, 3)),
        ({"prompt_tokens": 12, "completion_tokens": 3}, (12, 3)),
        (SimpleNamespace(prompt_tokens=12.0, completion_tokens=3), (12, 3)),
        (None, (100, 4)),  # no usage: a token per 3 characters, rounded up
        (SimpleNamespace(prompt_tokens=0, completion_tokens=0), (100, 4)),  # LiteLLM's zeros
    ],
)
def test_usage_read_or_estimated(usage: object, expected: tuple[int, int]) -> None:
    assert checked_usage(usage, MESSAGES, "answer text") == expected


@pytest.mark.parametrize(
    "usage",
    [
        SimpleNamespace(prompt_tokens=-1000, completion_tokens=-250),
        SimpleNamespace(prompt_tokens=10, completion_tokens=-1),
        SimpleNamespace(prompt_tokens=10.5, completion_tokens=2),
        SimpleNamespace(prompt_tokens="12", completion_tokens=2),
        SimpleNamespace(prompt_tokens=True, completion_tokens=2),
        SimpleNamespace(prompt_tokens=10**15, completion_tokens=2),
        SimpleNamespace(prompt_tokens=float("inf"), completion_tokens=2),
    ],
)
def test_usage_that_cannot_be_true_is_the_providers_error(usage: object) -> None:
    with pytest.raises(TransientJudgeError) as info:
        checked_usage(usage, MESSAGES, "answer")
    assert info.value.kind == "bad_usage"


def test_cost_is_never_negative_or_infinite() -> None:
    assert checked_cost(0.0) == 0.0 and checked_cost(0.25) == 0.25
    for bad in (-0.01, float("inf"), float("nan")):
        with pytest.raises(TransientJudgeError):
            checked_cost(bad)


HOSTILE = "[bold red]PWNED[/] [/nosuch] \x1b[2J\x1b]0;owned\x07 \u202eevil\u202c end"


def rendered(renderable: object) -> str:
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=True, color_system="truecolor").print(renderable)
    return out.getvalue()


def test_safe_text_shows_markup_as_written_and_escapes_controls() -> None:
    text = safe_text(HOSTILE)
    assert (
        text.plain
        == "[bold red]PWNED[/] [/nosuch] \\x1b[2J\\x1b]0;owned\\x07 \\u202eevil\\u202c end"
    )
    out = rendered(text)
    assert "[bold red]PWNED[/]" in out  # not interpreted
    assert "\x1b[2J" not in out and "\x07" not in out and "\u202e" not in out


def test_safe_text_in_a_table_cell_and_multiline_errors() -> None:
    table = Table()
    table.add_column(safe_text("[/judge]"))
    table.add_row(safe_text("[/]item\x1b[31m"))  # a plain string here would raise MarkupError
    out = rendered(table)
    assert "[/judge]" in out and "[/]item\\x1b[31m" in out
    assert safe_text("line one\nline\ttwo", multiline=True).plain == "line one\nline\\x09two"
    assert safe_text("a\nb").plain == "a\\x0ab"
