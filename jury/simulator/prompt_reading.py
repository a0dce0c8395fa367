"""Pure prompt reading: what the project's judge prompts say, recovered with regexes.

The contract: a `Criterion: <id>` line, a `Scale: <min> to <max>` line, and the item to
judge between `<data-NONCE>` and `</data-NONCE>`, with fields in tags such as `<output>`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_NUMBER = r"(-?\d+(?:\.\d+)?)"
# Tolerate light markdown around the label ("**Criterion:** x", "- Scale: 1 to 5").
_LABEL_PREFIX = r"^[ \t*_#>-]*"
_LABEL_COLON = r"[ \t*_]*:[ \t*_`\"']*"
_CRITERION = re.compile(
    _LABEL_PREFIX + r"criterion" + _LABEL_COLON + r"([A-Za-z0-9_.-]+)",
    re.IGNORECASE | re.MULTILINE,
)
_SCALE = re.compile(
    _LABEL_PREFIX + r"scale" + _LABEL_COLON + _NUMBER + r"[ \t]*(?:to|-|–|—|\.\.)[ \t]*" + _NUMBER,
    re.IGNORECASE | re.MULTILINE,
)
# The backreference makes the block end only at the closing tag with the same nonce, so a
# forged `</data-abc>` inside the data cannot end it early.
_DATA_BLOCK = re.compile(r"<data-([0-9a-fA-F]+)>(.*?)</data-\1>", re.DOTALL)
_OUTPUT_FIELD = re.compile(r"<output>(.*?)</output>", re.DOTALL)
# How jury asks for a pass vote, and for true/false/uncertain
# (jury.worker.judging.prompt_templates).
VOTE_MARK = '"pass": <true'
TRUE_FALSE_MARK = '"answer": "<true, false or uncertain>"'


class PromptError(ValueError):
    """The request is not a judge prompt this simulator understands (answered with a 400)."""


@dataclass(frozen=True)
class JudgePrompt:
    criterion: str
    low: float
    high: float
    data: str  # Everything inside the data blocks: untrusted text.
    output_text: str  # The `<output>` field, or the whole data block when it has none.
    # What the prompt asks beyond a score (jury.worker.judging.prompt_templates): a pass vote, and
    # true/false/uncertain instead of a score (read on 0..2: false, uncertain, true).
    vote: bool = False
    true_false: bool = False


def messages_text(messages: object) -> str:
    """The text of all chat messages, joined; content may be a string or a list of parts."""
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        raise PromptError("'messages' must be a list of chat messages")
    texts: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            raise PromptError("each message must be an object with 'role' and 'content'")
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(
                part["text"]
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
        elif content is not None:
            raise PromptError("message 'content' must be a string or a list of parts")
    return "\n\n".join(texts)


def read_prompt(text: str) -> JudgePrompt:
    """Extract criterion, scale and data from a judge prompt.

    The criterion and scale are read only outside data blocks, so an item cannot smuggle in
    its own `Criterion:` or `Scale:` line. A prompt without a data block is judged whole.
    """
    # A prompt template may fence each item field on its own: the blocks together are the data.
    blocks = [m.group(2) for m in _DATA_BLOCK.finditer(text)]
    data = "\n".join(blocks) if blocks else text
    instructions = _DATA_BLOCK.sub(" ", text)

    criterion = _CRITERION.search(instructions)
    if criterion is None:
        raise PromptError("the prompt has no 'Criterion: <id>' line")
    true_false = TRUE_FALSE_MARK in instructions
    scale = _SCALE.search(instructions)
    if true_false:
        low, high = 0.0, 2.0
    elif scale is None:
        raise PromptError("the prompt has no 'Scale: <min> to <max>' line")
    else:
        low, high = float(scale.group(1)), float(scale.group(2))
        if low >= high:
            raise PromptError(f"the scale minimum {scale.group(1)} is not below its maximum")

    output = _OUTPUT_FIELD.search(data)
    output_text = (output.group(1) if output else data).strip()
    vote = VOTE_MARK in instructions
    return JudgePrompt(criterion.group(1), low, high, data, output_text, vote, true_false)
