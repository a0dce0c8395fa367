"""The simulator as a model under test: a free-text answer to a prompt that is not a judge's.

A batch's LLM candidates (jury.schemas.candidates) ask the simulator to answer an item's
input; such a prompt has no `Criterion:` or `Scale:` line and no data block. The answer is
deterministic in the persona, the seed and the prompt, and differs between personas in
length and wording, so that two candidates' answers to one input are two different outputs
to compare.
"""

from __future__ import annotations

import hashlib

from jury.simulator.prompt_reading import PromptError, messages_text

# What a judge prompt holds: a prompt with any of these is never answered as free text.
_JUDGE_MARKS = ("Criterion:", "Scale:", "<data-")
_SENTENCES = (
    "It depends on the details given.",
    "The short answer is yes, with care.",
    "Consider the context before acting.",
    "Here are the steps, one by one.",
    "The policy covers this case directly.",
    "Ask again if anything is unclear.",
)


def written_answer(messages: object, persona: str, seed: int) -> str | None:
    """The persona's answer to these messages, or None when they hold a judge prompt (or
    are no messages at all): those get the simulator's usual handling."""
    try:
        text = messages_text(messages)
    except PromptError:
        return None
    if any(mark in text for mark in _JUDGE_MARKS):  # a judge prompt, malformed or not
        return None
    digest = hashlib.blake2b(f"{seed}|{persona}|{text}".encode(), digest_size=8).digest()
    count = 1 + digest[0] % len(_SENTENCES)
    sentences = [_SENTENCES[(digest[1] + i) % len(_SENTENCES)] for i in range(count)]
    question = text.strip().splitlines()[-1][:200] if text.strip() else ""
    return f"({persona}) On “{question}”: " + " ".join(sentences)
