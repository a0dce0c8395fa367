"""The batch's `candidates:` section: what writes the outputs a batch judges. Pure.

A candidate is an LLM called through LiteLLM (`model`, the item's `input` as the user message)
or an HTTP endpoint (`url`, a JSON body template, a JSON path to the answer), as the LLM judge
evaluator fetches its two chatbots' answers. One generation task per (item, candidate) stores
the text (an error is stored as the answer text, marked as such, and judged as the evaluator
does); then the item is judged: with one candidate its text is the item's `output`, with two
the pair's A and B, named by the candidates' names.

The body template is JSON, never text: the item's input replaces the marker `{{input}}` inside
string values only, so an input holding quotes or braces stays one JSON string value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from itertools import combinations
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from jury.schemas.output_sets import pair_item_id, pair_of
from jury.schemas.placeholders import has_placeholder, placeholder_problem, taken_variables
from jury.schemas.strict import (
    MAX_NAME_CHARS,
    MAX_PROMPT_CHARS,
    MAX_URL_CHARS,
    StrictModel,
    repeated,
)

MAX_CANDIDATES = 20  # as many as an item's `outputs` (schemas.output_sets)
CANDIDATE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,40}")
INPUT_MARKER = "{{input}}"
# An HTTP answer longer than this is cut: it is judged as text, not stored as a file.
MAX_ANSWER_CHARS = 200_000
_PATH_PART = re.compile(r"[^.\[\]\s]+|\[\d+\]")


def _checked_placeholders(fields: dict[str, str | None]) -> None:
    for name, value in fields.items():
        problem = value is not None and has_placeholder(value) and placeholder_problem(value)
        if problem:
            raise ValueError(f"{name}: {problem}")


class LLMCandidate(StrictModel):
    """A model that answers the item's input, through LiteLLM (as a judge is called)."""

    name: str = Field(max_length=MAX_NAME_CHARS)
    model: str = Field(min_length=1, max_length=200)
    api_base: str | None = Field(default=None, max_length=MAX_URL_CHARS)
    api_key_env: str | None = Field(default=None, max_length=MAX_NAME_CHARS)
    temperature: float = Field(default=0.7, ge=0, le=2)
    max_tokens: int = Field(default=1024, ge=1, le=32000)
    system: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    timeout_s: float = Field(default=60.0, gt=0, le=600)
    rpm: int | None = Field(default=None, gt=0)
    tpm: int | None = Field(default=None, gt=0)
    max_in_flight: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _check(self) -> LLMCandidate:
        _checked_placeholders(
            {"model": self.model, "api_base": self.api_base, "api_key_env": self.api_key_env}
        )
        return self


HttpMethod = Literal["POST", "PUT", "GET"]


def request_body_problem(method: str, body: Any) -> str | None:
    """What is wrong with sending `body` by `method`, if anything: the one check of an HTTP
    candidate's request, made when the batch is loaded (`--dry-run` and submit), when a worker
    reads the stored batch, and before the worker sends the request."""
    if method == "GET" and body is not None:
        return (
            "a GET request has no body: remove `body:` (the item's input is then not sent), "
            "or use `method: POST` or `PUT`"
        )
    return None


def request_body(candidate: HTTPCandidate, text: str) -> Any:
    """The JSON body to send with `text` as the input (None: no body); raises ValueError
    when the candidate's method takes none (request_body_problem)."""
    problem = request_body_problem(candidate.method, candidate.body)
    if problem:
        raise ValueError(problem)
    return None if candidate.body is None else fill_body(candidate.body, text)


class HTTPCandidate(StrictModel):
    """An HTTP endpoint that answers the item's input: `body` is a JSON template in which the
    string `{{input}}` stands for the input; `answer_path` finds the answer in the reply."""

    name: str = Field(max_length=MAX_NAME_CHARS)
    url: str = Field(min_length=1, max_length=MAX_URL_CHARS)
    method: HttpMethod = "POST"
    # `${VAR}` placeholders here are expanded only by the worker, at the call (a token in an
    # Authorization header never reaches the store).
    headers: dict[str, Annotated[str, Field(max_length=MAX_URL_CHARS)]] = Field(
        default_factory=dict, max_length=50
    )
    body: Any = Field(default_factory=lambda: {"input": INPUT_MARKER})
    answer_path: str = Field(default="answer", min_length=1, max_length=MAX_NAME_CHARS)
    timeout_s: float = Field(default=60.0, gt=0, le=600)
    # Limits of the endpoint's own, cluster-wide as a judge's (jury.worker.limits.ratelimit): a
    # service under test is often a staging box that 256 calls per worker would topple.
    rpm: int | None = Field(default=None, gt=0)
    max_in_flight: int | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _get_sends_no_body(cls, data: Any) -> Any:
        # A GET candidate that gives no body has none (not the default template): so its
        # stored form, `body: null`, reads back as the same candidate on the workers.
        if isinstance(data, dict) and data.get("method") == "GET" and "body" not in data:
            return {**data, "body": None}
        return data

    @model_validator(mode="after")
    def _check(self) -> HTTPCandidate:
        _checked_placeholders({"url": self.url, **self.headers})
        if not has_placeholder(self.url) and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} must be an http(s) URL")
        parse_answer_path(self.answer_path)
        problem = request_body_problem(self.method, self.body)
        if problem:
            raise ValueError(problem)
        return self


Candidate = LLMCandidate | HTTPCandidate


def parse_candidate(data: Any) -> Any:
    """A raw entry as the candidate it describes: `url` makes an endpoint, else an LLM."""
    if isinstance(data, dict) and "url" in data:
        return HTTPCandidate.model_validate(data)
    if isinstance(data, dict) and "model" in data:
        return LLMCandidate.model_validate(data)
    if isinstance(data, LLMCandidate | HTTPCandidate):
        return data
    raise ValueError("a candidate has a `model` (an LLM) or a `url` (an HTTP endpoint)")


def candidates_as_pair(data: Any) -> Any:
    """A raw batch whose two candidates are compared: pairwise, its sides named after them."""
    if not isinstance(data, dict) or not isinstance(data.get("candidates"), list):
        return data
    raw = data["candidates"]
    if len(raw) < 2 or data.get("pairwise") is False:
        return data
    if len(raw) > 2:  # every pair of them, each item's pair items named after them
        pairwise = data.get("pairwise")
        return {**data, "pairwise": {} if pairwise in (None, True) else pairwise}
    names = [c.get("name") if isinstance(c, dict) else getattr(c, "name", None) for c in raw]
    pairwise = data.get("pairwise")
    pairwise = {} if pairwise in (None, True) else pairwise
    distinct = all(names) and len(set(names)) == 2  # else candidates_problem says why
    if isinstance(pairwise, dict) and "names" not in pairwise and distinct:
        pairwise = {**pairwise, "names": names}
    return {**data, "pairwise": pairwise}


def candidates_problem(names: list[str], pairwise: bool) -> str | None:
    """What is wrong with the candidates, as a whole, if anything."""
    if len(names) >= 2 and not pairwise:
        return "two or more candidates are compared, in a pairwise batch: remove `pairwise: false`"
    if len(names) == 1 and pairwise:
        return (
            "one candidate writes each item's one output, which a pairwise batch does not "
            "judge; give two candidates, or remove `pairwise:`"
        )
    if len(names) > MAX_CANDIDATES:
        return f"{len(names)} candidates: at most {MAX_CANDIDATES}"
    bad = [n for n in names if not CANDIDATE_NAME.fullmatch(n)]
    if bad:
        return f"candidate names {bad} may hold only ASCII letters, digits and _.- (at most 40)"
    dupes = repeated(names)
    if dupes:
        return f"candidate names must be unique, {dupes} appear twice"
    return None


def expand_for_candidates(fields: dict[str, Any], names: list[str]) -> list[dict[str, Any]]:
    """A raw item as the items its candidates' answers are judged in: itself for one or two
    candidates, else one pair item per pair of candidates (`q1 [a vs b]`, as an item's
    `outputs` is expanded), their outputs written once the candidates have answered."""
    if len(names) <= 2:
        return [fields]
    item_id = str(fields.get("id", ""))
    return [{**fields, "id": pair_item_id(item_id, a, b)} for a, b in combinations(names, 2)]


def judged_item_ids(source_item: str, names: list[str]) -> list[str]:
    """The ids of the items judged on one input's answers (see expand_for_candidates)."""
    if len(names) <= 2:
        return [source_item]
    return [pair_item_id(source_item, a, b) for a, b in combinations(names, 2)]


def source_item_id(item_id: str, names: list[str]) -> str:
    """The input item a judged item stands for: itself, or a pair item's item."""
    pair = pair_of(item_id) if len(names) > 2 else None
    return pair.item if pair else item_id


def outputs_of(item_id: str, names: list[str], texts: dict[str, str]) -> dict[str, str]:
    """The output fields of a judged item, from its candidates' answers by name: `output`
    for one candidate; A the first and B the second of two; a pair item's own two sides."""
    if len(names) == 1:
        return {"output": texts[names[0]]}
    pair = pair_of(item_id) if len(names) > 2 else None
    a, b = (pair.a, pair.b) if pair else (names[0], names[1])
    return {"output_a": texts[a], "output_b": texts[b]}


def endpoint_variables(candidate: HTTPCandidate, env: Mapping[str, str]) -> tuple[str, ...]:
    """The variables an endpoint candidate's URL and headers take from `env`: what its call
    carries out of the worker (jury.schemas.egress judges where they may go)."""
    texts = (candidate.url, *candidate.headers.values())
    return tuple(dict.fromkeys(v for text in texts for v in taken_variables(text, env)))


def fill_body(template: Any, text: str) -> Any:
    """The body template with `{{input}}` replaced by `text` inside its string values (and
    keys): the input is always data within one JSON string, never JSON of its own."""
    if isinstance(template, str):
        return template.replace(INPUT_MARKER, text)
    if isinstance(template, list):
        return [fill_body(value, text) for value in template]
    if isinstance(template, dict):
        return {fill_body(k, text): fill_body(v, text) for k, v in template.items()}
    return template


def parse_answer_path(path: str) -> list[str | int]:
    """`choices[0].message.content` (or `$.answer`, `data.0.text`) as its keys and indexes."""
    text = path[2:] if path.startswith("$.") else path
    parts: list[str | int] = []
    for piece in text.split("."):
        found = _PATH_PART.findall(piece)
        if not piece or "".join(found) != piece:
            raise ValueError(
                f"answer_path {path!r} must read like `answer` or `choices[0].message.content`"
            )
        for part in found:
            parts.append(int(part[1:-1]) if part.startswith("[") else part)
    return [int(p) if isinstance(p, str) and p.isdigit() else p for p in parts]


class AnswerNotFound(ValueError):
    """The reply holds nothing at the answer path."""


def answer_at(reply: Any, path: str) -> str:
    """The value at `path` in a parsed JSON reply, as text (a non-string value as JSON)."""
    value = reply
    walked: list[str] = []
    for part in parse_answer_path(path):
        walked.append(str(part))
        if isinstance(part, int) and isinstance(value, list) and -len(value) <= part < len(value):
            value = value[part]
        elif isinstance(value, dict) and str(part) in value:
            value = value[str(part)]
        else:
            raise AnswerNotFound(f"the reply has no {'.'.join(walked)!r} (answer_path {path!r})")
    if value is None:
        raise AnswerNotFound(f"the reply's {path!r} is null")
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text[:MAX_ANSWER_CHARS]


def error_answer(kind: str, detail: str) -> str:
    """The answer text of a failed generation: judged as the answer, as the evaluator does."""
    return f"[ERROR {kind}] {detail}"
