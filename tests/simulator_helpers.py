"""Prompts and expected scores shared by the simulator tests."""

from __future__ import annotations

import math
import os
import random
from pathlib import Path

from jury.simulator.personas import (
    PERSONAS,
    judge_score,
    latent_quality,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO_ROOT = Path(__file__).resolve().parent.parent
SEED = 7
SYSTEM = "You are an impartial judge. Score the data on the criterion, using the scale."
USER = (
    "Criterion: relevance\nRubric: Does the output address the input?\nScale: 1 to 5\n\n"
    "<data-9f3c>\n<input>What is 2+2?</input>\n<output>4</output>\n</data-9f3c>\n\n"
    'Answer with JSON: {"score": <number>, "reasoning": "..."}'
)
MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]


def truth_score(seed: int, criterion: str, output: str, low: float, high: float) -> int:
    """What a noise-free, unbiased judge answers: the latent quality placed on the scale."""
    return math.floor(low + latent_quality(seed, criterion, output) * (high - low) + 0.5)


def score_of(persona: str, output: str, *, temperature: float, rng: random.Random) -> float:
    return judge_score(
        PERSONAS[persona],
        seed=SEED,
        criterion="relevance",
        output_text=output,
        data=f"<output>{output}</output>",
        low=1,
        high=5,
        temperature=temperature,
        rng=rng,
    )
