"""Combined and pairwise judge prompts: reading them, and what a persona answers.

The contract (worker.mode_prompts):
- combined: a `Criteria (…):` header, then one `- <name> | scale <min> to <max> | <rubric>`
  line per criterion; the answer is `{"scores": {"<name>": {"score": …, "reasoning": …}}}`.
- pairwise: the data block holds `<output_1>` and `<output_2>`; the answer gives
  `score_1` and `score_2` (per criterion, inside `scores`, when combined too).

Each output is scored as the single-output prompts score it (latent quality per output and
criterion, the persona's bias and temperature-scaled noise), so the modes agree on the truth.
A persona's `position_bias` adds to the output shown first: the bias that judging both
orders cancels.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

from jury.simulator.answers import GARBLED_VOTE, reasoning_for
from jury.simulator.personas import Persona, clamp, judge_score, round_half_up
from jury.simulator.prompt_reading import VOTE_MARK, PromptError, read_prompt

_NUMBER = r"(-?\d+(?:\.\d+)?)"
_DATA_BLOCK = re.compile(r"<data-([0-9a-fA-F]+)>(.*?)</data-\1>", re.DOTALL)
_CRITERIA_HEADER = re.compile(r"^criteria\b.*:\s*$", re.IGNORECASE | re.MULTILINE)
_CRITERION_LINE = re.compile(
    rf"^- ([A-Za-z0-9_.:/@+-]+) \| scale {_NUMBER} to {_NUMBER}\b", re.MULTILINE
)
_OUTPUT = {n: re.compile(rf"<output_{n}>\n?(.*?)\n?</output_{n}>", re.DOTALL) for n in (1, 2)}


@dataclass(frozen=True)
class Criterion:
    name: str
    low: float
    high: float


@dataclass(frozen=True)
class ModePrompt:
    """A combined or pairwise prompt: its criteria and the outputs in the order shown."""

    criteria: tuple[Criterion, ...]
    combined: bool
    outputs: tuple[str, ...]  # one output, or (shown first, shown second)
    data: str
    vote: bool = False  # a pass vote asked beside each score (combined, one output)

    @property
    def paired(self) -> bool:
        return len(self.outputs) == 2


def _combined_criteria(instructions: str) -> tuple[Criterion, ...] | None:
    if not _CRITERIA_HEADER.search(instructions):
        return None
    criteria = []
    for name, low, high in _CRITERION_LINE.findall(instructions):
        if float(low) >= float(high):
            raise PromptError(f"the scale of criterion {name!r} has its minimum above its maximum")
        criteria.append(Criterion(name, float(low), float(high)))
    if not criteria:
        raise PromptError("the 'Criteria:' list names no '- <name> | scale <min> to <max>' line")
    return tuple(criteria)


def read_mode_prompt(text: str) -> ModePrompt | None:
    """The combined or pairwise prompt in `text`; None for an ordinary single prompt."""
    block = _DATA_BLOCK.search(text)
    data = block.group(2) if block else text
    instructions = _DATA_BLOCK.sub(" ", text)
    pair = [pattern.search(data) for pattern in (_OUTPUT[1], _OUTPUT[2])]
    outputs = tuple(m.group(1).strip() for m in pair if m is not None)
    criteria = _combined_criteria(instructions)
    if criteria is None and len(outputs) < 2:
        return None
    if criteria is None:
        single = read_prompt(text)
        criteria = (Criterion(single.criterion, single.low, single.high),)
        return ModePrompt(criteria, combined=False, outputs=outputs, data=data)
    if len(outputs) < 2:
        single_output = re.search(r"<output>(.*?)</output>", data, re.DOTALL)
        outputs = ((single_output.group(1) if single_output else data).strip(),)
    vote = VOTE_MARK in instructions
    return ModePrompt(criteria, combined=True, outputs=outputs, data=data, vote=vote)


def _shown(score: float) -> int | float:
    return int(score) if float(score).is_integer() else score


def _scores(
    persona: Persona,
    prompt: ModePrompt,
    criterion: Criterion,
    *,
    seed: int,
    temperature: float,
    rng: random.Random,
    t0_noise: float | None,
    group: str | None,
    group_error: float,
) -> list[float]:
    """Each output's score on one criterion, the first shown getting the position bias."""
    scores = []
    for position, output in enumerate(prompt.outputs):
        score = judge_score(
            persona,
            seed=seed,
            criterion=criterion.name,
            output_text=output,
            data=prompt.data,
            low=criterion.low,
            high=criterion.high,
            temperature=temperature,
            rng=rng,
            t0_noise=t0_noise,
            group=group,
            group_error=group_error,
        )
        if position == 0 and prompt.paired and persona.position_bias:
            shift = round_half_up(persona.position_bias * (criterion.high - criterion.low))
            score = clamp(score + shift, criterion.low, criterion.high)
        scores.append(score)
    return scores


def answer_mode_prompt(
    persona: Persona,
    prompt: ModePrompt,
    *,
    seed: int,
    temperature: float,
    rng: random.Random,
    t0_noise: float | None = None,
    group: str | None = None,
    group_error: float = 0.0,
    garbled_vote: bool = False,
) -> str:
    """The persona's JSON answer to a combined or pairwise prompt; asked a vote, pass on each
    criterion whose score reaches the middle of its scale (`garbled_vote`: neither)."""
    entries: dict[str, dict[str, object]] = {}
    for criterion in prompt.criteria:
        scores = _scores(
            persona,
            prompt,
            criterion,
            seed=seed,
            temperature=temperature,
            rng=rng,
            t0_noise=t0_noise,
            group=group,
            group_error=group_error,
        )
        reasoning = reasoning_for(sum(scores) / len(scores), criterion.low, criterion.high)
        if prompt.paired:
            entries[criterion.name] = {
                "score_1": _shown(scores[0]),
                "score_2": _shown(scores[1]),
                "reasoning": reasoning,
            }
        else:
            entries[criterion.name] = {"score": _shown(scores[0]), "reasoning": reasoning}
            if prompt.vote:
                passed = scores[0] >= (criterion.low + criterion.high) / 2
                entries[criterion.name]["pass"] = GARBLED_VOTE if garbled_vote else passed
    if prompt.combined:
        return json.dumps({"scores": entries})
    (only,) = entries.values()
    return json.dumps(only)
