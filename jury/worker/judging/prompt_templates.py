"""The words of the one-criterion prompt (jury.worker.judging.prompts.build_messages) when a judge
is
asked more than a score: a pass vote, another scoring template (schemas.judge_prompts), or a
prompt template of the user's own.

Without any of them the prompt is the default one (same text, same cache keys). With them, it
keeps its contract: the system message says what is data;
every item value is fenced as data under one nonce free in every text of the prompt; the
answer format is appended by jury, so parsing holds whatever the template says.

A template is filled in one pass (a regex substitution over the template only): item text is
never scanned for placeholders, so a `{rubric}` inside an output stays as written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jury.schemas.batch import BatchConfig, Dimension, Item, Judge
from jury.schemas.criteria import builtin_criterion, rubric_on_scale
from jury.schemas.judge_prompts import CONTINUOUS_MAX, PLACEHOLDER, metadata_key
from jury.worker.judging.prompts import VOTE_ASK, Wording, build_messages, data_nonce


@dataclass(frozen=True)
class Asking:
    """What one judge is asked, beyond the criterion: from the batch and the judge."""

    reasoning_first: bool = False
    pass_vote: bool = False
    scoring: str = "likert"
    template: str | None = None

    @property
    def plain(self) -> bool:
        """Nothing beyond today's prompt: jury.worker.judging.prompts builds it unchanged."""
        return not self.pass_vote and self.scoring == "likert" and self.template is None


def asking_of(config: BatchConfig, judge: Judge) -> Asking:
    return Asking(
        reasoning_first=judge.reasoning_first,
        pass_vote=config.pass_vote,
        scoring=judge.scoring,
        template=judge.prompt_template or config.prompt_template,
    )


TRUE_FALSE_ASK = (
    "Answer true if the output meets the criterion, false if it does not, and uncertain if "
    "you cannot tell."
)


def scale_words(dimension: Dimension, scoring: str) -> str:
    """The scale as the prompt states it (`{scale}` in a template)."""
    if scoring == "true_false_uncertain":
        return "true, false or uncertain"
    if scoring == "continuous":
        return f"0 to {CONTINUOUS_MAX:g} (0 = worst, {CONTINUOUS_MAX:g} = best)"
    scale = dimension.resolved_scale
    return f"{scale.min:g} to {scale.max:g} ({scale.min:g} = worst, {scale.max:g} = best)"


def rubric_for(dimension: Dimension, scoring: str) -> str:
    """The rubric as the prompt states it: a built-in's anchors follow the 0–100 a continuous
    judge answers on (a custom description is the user's own, left as written)."""
    description = dimension.description or ""
    builtin = builtin_criterion(dimension.name)
    if scoring != "continuous" or builtin is None:
        return description
    scale = dimension.resolved_scale
    if description != rubric_on_scale(builtin, scale.min, scale.max):
        return description
    return rubric_on_scale(builtin, 0, CONTINUOUS_MAX)


def metadata_text(value: Any) -> str:
    """A metadata value as the prompt shows it: text as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def item_values(item: Item, names: list[str]) -> dict[str, str]:
    """The item's value of each item placeholder a template names ('' when it has none)."""
    values: dict[str, str] = {}
    for name in names:
        meta = metadata_key(name)
        if meta is not None:
            found = item.metadata.get(meta)
            values[name] = "" if found is None else metadata_text(found)
        elif name in ("input", "output", "reference", "context"):
            values[name] = getattr(item, name) or ""
    return values


def render_template(template: str, dimension: Dimension, item: Item, scoring: str) -> str:
    """The template with its placeholders filled in once: the criterion's as text, each item
    value fenced as data (`<data-NONCE><field>…</field></data-NONCE>`)."""
    names = [m.group(1) for m in PLACEHOLDER.finditer(template) if m.group(1) is not None]
    values = item_values(item, names)
    trusted = {
        "criterion": dimension.name,
        "rubric": rubric_for(dimension, scoring),
        "scale": scale_words(dimension, scoring),
    }
    nonce = data_nonce([*values.values(), template, *trusted.values()])

    def fill(match: Any) -> str:
        name = match.group(1)
        if name is None:  # `{{` or `}}`
            return str(match.group(0)[0])
        if name in trusted:
            return trusted[name]
        tag = name.replace(".", "-")
        return f"<data-{nonce}>\n<{tag}>\n{values[name]}\n</{tag}>\n</data-{nonce}>"

    return PLACEHOLDER.sub(fill, template)


def _answer_pairs(dimension: Dimension, asking: Asking) -> tuple[tuple[str, str], ...]:
    if asking.scoring == "true_false_uncertain":
        pairs = [("answer", '"<true, false or uncertain>"')]
    elif asking.scoring == "continuous":
        pairs = [("score", f"<number from 0 to {CONTINUOUS_MAX:g}>")]
    else:
        scale = dimension.resolved_scale
        pairs = [("score", f"<number from {scale.min:g} to {scale.max:g}>")]
    if asking.pass_vote:
        pairs.append(("pass", VOTE_ASK))
    return (*pairs, ("reasoning", '"<one or two sentences>"'))


def wording_of(item: Item, dimension: Dimension, asking: Asking) -> Wording:
    """How the prompt words what `asking` asks: the scale it answers on, the answer's fields,
    and the user's template filled in."""
    answer = _answer_pairs(dimension, asking)
    if asking.template is not None:
        body = render_template(asking.template, dimension, item, asking.scoring)
        return Wording(answer=answer, body=tuple(body.split("\n")))
    scale_line = (
        TRUE_FALSE_ASK
        if asking.scoring == "true_false_uncertain"
        else f"Scale: {scale_words(dimension, asking.scoring)}"
    )
    return Wording(rubric_for(dimension, asking.scoring), scale_line, answer)


def asked_messages(item: Item, dimension: Dimension, asking: Asking) -> list[dict[str, str]]:
    """One criterion, one output, asked as `asking` says (jury.worker.judging.prompts' one
    prompt)."""
    return build_messages(
        item, dimension, asking.reasoning_first, wording_of(item, dimension, asking)
    )
