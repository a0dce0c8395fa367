"""The `candidates:` section: its schema, the JSON body template and the answer path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from jury.batchfile.loading import load_batch
from jury.errors import BatchFileError
from jury.schemas.batch import BatchConfig, Item
from jury.schemas.candidates import (
    AnswerNotFound,
    HTTPCandidate,
    LLMCandidate,
    answer_at,
    error_answer,
    expand_for_candidates,
    fill_body,
    judged_item_ids,
    outputs_of,
    parse_answer_path,
    request_body,
    source_item_id,
)

BASE = {"judges": ["openai/gpt-4o-mini"], "dimensions": ["relevance"]}


def test_an_entry_with_url_is_an_endpoint_and_one_with_model_an_llm() -> None:
    config = BatchConfig.model_validate(
        {
            **BASE,
            "candidates": [
                {"name": "dotnet", "url": "http://localhost:5000/chat", "answer_path": "reply"},
                {"name": "gpt", "model": "openai/gpt-4o-mini", "system": "Be brief."},
            ],
        }
    )
    endpoint, llm = config.candidates
    assert isinstance(endpoint, HTTPCandidate) and endpoint.method == "POST"
    assert isinstance(llm, LLMCandidate) and llm.system == "Be brief."
    # Two candidates are a pair, its sides named after them.
    assert config.pairwise is not None and config.pairwise.names == ("dotnet", "gpt")
    # The stored config reads back the same.
    again = BatchConfig.model_validate(config.model_dump(mode="json"))
    assert again.model_dump() == config.model_dump()


def test_one_candidate_is_not_pairwise_and_bad_sections_are_refused() -> None:
    one = BatchConfig.model_validate({**BASE, "candidates": [{"name": "m", "model": "openai/x"}]})
    assert one.pairwise is None
    bad = [
        ([{"name": "m", "model": "openai/x"}], {"pairwise": True}, "one candidate"),
        ([{"name": "m", "model": "openai/x"}, {"name": "m", "model": "openai/y"}], {}, "twice"),
        ([{"name": "a b", "model": "openai/x"}], {}, "may hold only"),
        (
            [{"name": "a", "model": "openai/x"}, {"name": "b", "url": "http://h"}],
            {"pairwise": False},
            "pairwise: false",
        ),
        ([{"name": "x", "url": "ftp://host"}], {}, "http(s) URL"),
        ([{"name": "x", "url": "http://h", "answer_path": "a..b"}], {}, "answer_path"),
        ([{"name": "x", "url": "http://h", "headers": {"A": "${1X}"}}], {}, "placeholder"),
        ([{"name": "x"}], {}, "`model`"),
        ([{"name": "x", "url": "http://h", "max_in_flight": 0}], {}, "greater than 0"),
        ([{"name": "x", "url": "http://h", "rpm": -5}], {}, "greater than 0"),
        ([{"name": "x", "url": "http://h", "tpm": 100}], {}, "Extra inputs are not permitted"),
        ([{"name": f"c{i}", "model": "openai/x"} for i in range(21)], {}, "21 candidates"),
    ]
    for candidates, extra, message in bad:
        with pytest.raises(ValidationError, match=re.escape(message)):
            BatchConfig.model_validate({**BASE, **extra, "candidates": candidates})


def test_a_get_candidate_has_no_body_as_loaded_as_stored_and_as_sent() -> None:
    """One check (request_body_problem) at loading, at reading the stored config back and
    before sending: a GET with no `body:` reads back the same; one with a body is refused."""
    get = BatchConfig.model_validate(
        {**BASE, "candidates": [{"name": "faq", "url": "http://h/faq", "method": "GET"}]}
    )
    stored = get.model_dump(mode="json")
    assert stored["candidates"][0]["body"] is None
    assert BatchConfig.model_validate(stored).model_dump(mode="json") == stored
    assert request_body(get.candidates[0], "hello") is None  # type: ignore[arg-type]
    post = HTTPCandidate(name="p", url="http://h/p")
    assert request_body(post, 'say "hi"') == {"input": 'say "hi"'}
    with pytest.raises(ValidationError, match="a GET request has no body: remove `body:`"):
        HTTPCandidate(name="g", url="http://h/g", method="GET", body={"q": "{{input}}"})
    # Built around the validator (as a forged stored config could be): refused at the call.
    forged = HTTPCandidate.model_construct(
        name="g", url="http://h/g", method="GET", body={"q": "x"}, headers={}
    )
    with pytest.raises(ValueError, match="a GET request has no body"):
        request_body(forged, "hello")


def test_header_placeholders_stay_as_written() -> None:
    config = BatchConfig.model_validate(
        {
            **BASE,
            "candidates": [
                {"name": "api", "url": "${BOT_URL}", "headers": {"Authorization": "Bearer ${TOK}"}}
            ],
        }
    )
    dumped = json.dumps(config.model_dump(mode="json"))
    assert "Bearer ${TOK}" in dumped and "${BOT_URL}" in dumped


def test_an_item_of_a_generating_batch_gives_only_its_input() -> None:
    context = {"pairwise": False, "generated": True}
    item = Item.model_validate({"id": "q1", "input": "How many days off?"}, context=context)
    assert item.output is None
    with pytest.raises(ValidationError, match="candidates write the outputs"):
        Item.model_validate({"id": "q1", "input": "x", "output": "y"}, context=context)
    with pytest.raises(ValidationError, match="give one"):
        Item.model_validate({"id": "q1"}, context=context)


def test_the_input_fills_string_values_only_and_stays_one_json_string() -> None:
    template = {"query": "{{input}}", "meta": {"prefix": "Q: {{input}}", "n": 3}, "l": [True]}
    hostile = 'say "hi"}, "admin": true, {"x": "{{input}}'
    body = fill_body(template, hostile)
    assert body["query"] == hostile
    assert body["meta"] == {"prefix": f"Q: {hostile}", "n": 3}
    assert body["l"] == [True]
    assert json.loads(json.dumps(body)) == body  # encoded as JSON: the input is one string
    assert "admin" not in body


def test_answer_paths() -> None:
    reply = {"choices": [{"message": {"content": "Ten days."}}], "data": {"n": 3, "x": None}}
    assert answer_at(reply, "choices[0].message.content") == "Ten days."
    assert answer_at(reply, "$.choices.0.message.content") == "Ten days."
    assert answer_at(reply, "data.n") == "3"  # a non-string value as JSON text
    assert answer_at(["a", "b"], "[1]") == "b"
    assert parse_answer_path("a.b[2].c") == ["a", "b", 2, "c"]
    for path in ("choices[1].message", "data.missing", "data.x"):
        with pytest.raises(AnswerNotFound):
            answer_at(reply, path)
    for bad in ("", "a..b", "a.[x]", "a b"):
        with pytest.raises(ValueError, match="answer_path"):
            parse_answer_path(bad)


def test_an_error_answer_names_its_kind() -> None:
    assert error_answer("http_500", "HTTP 500: down") == "[ERROR http_500] HTTP 500: down"


def test_more_than_two_candidates_are_compared_pair_by_pair() -> None:
    config = BatchConfig.model_validate(
        {**BASE, "candidates": [{"name": n, "model": "openai/x"} for n in ("a", "b", "c")]}
    )
    assert config.pairwise is not None and config.pairwise.names is None
    names = ["a", "b", "c"]
    pairs = ["q1 [a vs b]", "q1 [a vs c]", "q1 [b vs c]"]
    expanded = expand_for_candidates({"id": "q1", "input": "Hi?"}, names)
    assert [f["id"] for f in expanded] == pairs and all(f["input"] == "Hi?" for f in expanded)
    assert judged_item_ids("q1", names) == pairs
    assert [source_item_id(i, names) for i in pairs] == ["q1"] * 3
    texts = {"a": "A!", "b": "B!", "c": "C!"}
    assert outputs_of("q1 [a vs c]", names, texts) == {"output_a": "A!", "output_b": "C!"}
    # One or two candidates: the item itself, its output or its pair.
    assert expand_for_candidates({"id": "q1 [x vs y]"}, ["a", "b"]) == [{"id": "q1 [x vs y]"}]
    assert judged_item_ids("q1", ["a"]) == ["q1"]
    assert source_item_id("q1 [a vs b]", ["a", "b"]) == "q1 [a vs b]"
    assert outputs_of("q1", ["a"], texts) == {"output": "A!"}
    assert outputs_of("q1", ["b", "a"], texts) == {"output_a": "B!", "output_b": "A!"}


def test_waves_never_split_the_pair_items_of_one_input() -> None:
    from jury.producer.submission import _chunks, wave_sizes

    names = ["a", "b", "c"]
    context = {"pairwise": True, "generated": True}
    items = [
        Item.model_validate(fields, context=context)
        for q in ("q1", "q2", "q3")
        for fields in expand_for_candidates({"id": q, "input": "?"}, names)
    ]

    def pairs(item: Item) -> str:
        return source_item_id(item.id, names)

    waves = list(_chunks(iter(items), wave_sizes(2, 2), pairs))
    assert [len(w) for w in waves] == [3, 3, 3]
    assert all(len({source_item_id(i.id, names) for i in wave}) == 1 for wave in waves)
    plain = list(_chunks(iter(items), wave_sizes(2, 2), lambda item: item.id))  # by size
    assert [len(w) for w in plain] == [2, 2, 2, 2, 1]
    # The first wave small (the workers start at once), each next twice as large, at most 4.
    growing = list(_chunks(iter(items), wave_sizes(1, 4), lambda item: item.id))
    assert [len(w) for w in growing] == [1, 2, 4, 2]


def test_an_llm_candidate_litellm_cannot_route_is_refused_at_loading(tmp_path: Path) -> None:
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        "judges: [openai/gpt-4o-mini]\ndimensions: [relevance]\n"
        "candidates: [{name: bot, model: nosuch/model}]\nitems: [{id: q1, input: Hi?}]\n"
    )
    with pytest.raises(BatchFileError, match=re.escape("candidates[0].model")):
        load_batch(batch)
    batch.write_text(batch.read_text().replace("nosuch/model", "openai/gpt-4o-mini"))
    source = load_batch(batch)
    assert [item.input for item in source.items()] == ["Hi?"]
    assert [item.output for item in source.items()] == [None]


def test_the_dry_run_plan_counts_the_generation_calls(tmp_path: Path) -> None:
    """A call per (input, candidate) before the judging, priced where LiteLLM prices the model;
    the judges' prompts grow by the outputs they will read."""
    from jury.batchfile.planning import plan_batch

    candidates = [
        {"name": "a", "model": "openai/gpt-4o-mini", "max_tokens": 100},
        {"name": "b", "model": "openai/gpt-4o-mini", "max_tokens": 100},
        {"name": "c", "url": "http://127.0.0.1:9/chat"},
    ]
    items = [{"id": f"q{n}", "input": "x" * 400} for n in range(4)]
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps({**BASE, "candidates": candidates, "items": items}))
    source = load_batch(batch)
    plan = plan_batch(source.config, source.stats.count, source.stats.text_chars)
    assert source.stats.count == 12  # 4 inputs × 3 pairs
    assert [(g.candidate, g.calls, g.is_llm) for g in plan.generation] == [
        ("a", 4, True),
        ("b", 4, True),
        ("c", 4, False),
    ]
    llm = plan.generation[0]
    assert llm.prompt_tokens == 4 * 400 // 4 and llm.completion_tokens == 4 * 100
    assert llm.cost_usd is not None and llm.cost_usd > 0
    assert plan.generation[2].cost_usd is None
    without = BatchConfig.model_validate({**BASE, "pairwise": {}})
    bare = plan_batch(without, source.stats.count, source.stats.text_chars)
    assert plan.judges[0].prompt_tokens > bare.judges[0].prompt_tokens
    assert plan.cost_usd is not None and plan.cost_usd > plan.judges[0].cost_usd  # type: ignore[operator]
    assert plan.as_dict()["generation"][2]["target"] == "http://127.0.0.1:9/chat"
