"""Pure scoring: the hidden truth (latent quality) and how each judge persona distorts it.

Everything here is deterministic given its inputs (noise comes from a caller-supplied
random.Random), so benchmarks can import `latent_quality` to know the ground truth.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Persona:
    """A judge's character. bias and noise are fractions of the scale range (max - min).

    t0_noise is the residual non-determinism at low temperature, in temperature units: the
    noise is scaled by max(temperature, t0_noise), so at temperature 0 the persona is as noisy
    as it would be at temperature t0_noise. Real models are not deterministic at temperature 0
    (batching, floating-point sums in a different order, mixture-of-experts routing); the
    built-in personas keep 0, i.e. deterministic at 0, unless the simulator is told otherwise
    (`--t0-noise`).
    """

    name: str
    bias: float
    noise: float
    contrarian: bool = False  # Scores the mirrored quality 1 - q on about a third of items.
    gullible: bool = False  # Obeys score instructions injected into the data block.
    # Pairwise prompts: the output shown first gains this fraction of the scale range.
    position_bias: float = 0.0
    t0_noise: float = 0.0


PERSONAS: Mapping[str, Persona] = MappingProxyType(
    {
        "balanced": Persona("balanced", bias=0.0, noise=0.06),
        "lenient": Persona("lenient", bias=0.18, noise=0.08),
        "strict": Persona("strict", bias=-0.18, noise=0.08),
        "noisy": Persona("noisy", bias=0.0, noise=0.30),
        "contrarian": Persona("contrarian", bias=0.0, noise=0.08, contrarian=True),
        "gullible": Persona("gullible", bias=0.0, noise=0.06, gullible=True),
        "positional": Persona("positional", bias=0.0, noise=0.06, position_bias=0.25),
        # Fails in a biased way: always answers the top of the scale (for robust pooling).
        "maximal": Persona("maximal", bias=1.0, noise=0.0),
    }
)

_UINT64 = 2**64


def persona_name(model: str) -> str:
    """`strict@judge2` is persona `strict`: the suffix only tells panel members apart;
    `strict:family@judge2` is persona `strict` in bias group `family`."""
    return model.split("@", 1)[0].split(":", 1)[0]


def bias_group(model: str) -> str | None:
    """The bias group a model name puts its judge in (`persona:group@tag`), if any: judges of
    one group misjudge the same items the same way (see `group_shift`)."""
    _, colon, group = model.split("@", 1)[0].partition(":")
    return group if colon and group else None


def find_persona(model: str) -> Persona | None:
    return PERSONAS.get(persona_name(model))


def _hash_units(purpose: bytes, seed: int, criterion: str, output_text: str) -> tuple[float, float]:
    """Two independent uniforms in [0, 1) from a keyed hash of the item.

    `purpose` separates the hash streams (quality vs. mirroring) so they are uncorrelated.
    The output text goes last, so no choice of text can collide with another seed/criterion.
    """
    message = f"{seed}|{criterion}|{output_text}".encode()
    digest = hashlib.blake2b(message, digest_size=16, person=purpose).digest()
    first = int.from_bytes(digest[:8], "big") / _UINT64
    second = int.from_bytes(digest[8:], "big") / _UINT64
    return first, second


def latent_quality(seed: int, criterion: str, output_text: str) -> float:
    """The true quality in [0, 1] of an output under a criterion, for a given seed.

    It is the mean of two hash-derived uniforms, i.e. a triangular distribution peaking at
    0.5: every value in [0, 1] occurs, but mid-range quality is commoner than the extremes,
    like real outputs. Mean 0.5, standard deviation about 0.2.
    """
    first, second = _hash_units(b"jury-quality", seed, criterion, output_text)
    return (first + second) / 2.0


def is_mirrored(seed: int, criterion: str, output_text: str) -> bool:
    """Whether a contrarian judge reads this item upside down (about one item in three)."""
    first, _ = _hash_units(b"jury-mirror", seed, criterion, output_text)
    return first < 1.0 / 3.0


def group_shift(seed: int, group: str, criterion: str, output_text: str) -> float:
    """The shared misjudgement of one item by one bias group: a standard normal draw fixed by
    the item, so it is the same in every run and for every judge of the group, and
    independent between groups (Box–Muller on two hash uniforms)."""
    # The group's length first, so that no group and criterion can pass for another pair.
    first, second = _hash_units(
        b"jury-group", seed, f"{len(group)}:{group}|{criterion}", output_text
    )
    return math.sqrt(-2.0 * math.log(1.0 - first)) * math.cos(2.0 * math.pi * second)


def perceived_quality(persona: Persona, seed: int, criterion: str, output_text: str) -> float:
    """The quality the persona believes in before bias and noise."""
    quality = latent_quality(seed, criterion, output_text)
    if persona.contrarian and is_mirrored(seed, criterion, output_text):
        return 1.0 - quality
    return quality


_NUMBER = r"(-?\d+(?:\.\d+)?)"
_IGNORE_INSTRUCTIONS = re.compile(
    r"\b(?:ignore|disregard|forget)\b[^.\n]{0,40}?"
    r"\b(?:rubric|instructions?|criteri(?:on|a)|guidelines|rules|prompt)\b",
    re.IGNORECASE,
)
# "answer 5", "score: 5", "give it a 5", "give this a score of 5", "answer with 5"...
_DEMANDED_SCORE = re.compile(
    r"\b(?:answer|score|give|rate)\b"
    r"(?:\s+(?:it|this|that|me|us|a|an|the|with|of|score|rating|grade|is|as|to|output"
    r"|response|answer|item|text|just|only|exactly|always)\b)*"
    r"\s*[:=]?\s*" + _NUMBER,
    re.IGNORECASE,
)


def injected_score(data: str) -> float | None:
    """The score a prompt injection inside the data demands, if the data carries one.

    Both halves must be present: an order to ignore the rubric/instructions and a demanded
    number. A bare "score 3" in an essay about grading is not an injection.
    """
    if not _IGNORE_INSTRUCTIONS.search(data):
        return None
    demanded = _DEMANDED_SCORE.search(data)
    return float(demanded.group(1)) if demanded else None


def clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


def round_half_up(value: float) -> float:
    # Python's round() rounds halves to even, which would skew scores towards even numbers.
    return float(math.floor(value + 0.5))


def effective_temperature(temperature: float, t0_noise: float) -> float:
    """The temperature the noise is scaled by: never below the noise floor."""
    return max(temperature, t0_noise)


def judge_score(
    persona: Persona,
    *,
    seed: int,
    criterion: str,
    output_text: str,
    data: str,
    low: float,
    high: float,
    temperature: float,
    rng: random.Random,
    t0_noise: float | None = None,
    group: str | None = None,
    group_error: float = 0.0,
) -> float:
    """The persona's score on the scale [low, high].

    score = low + (q + bias + group_error * g) * range
            + Normal(0, noise * range * max(temperature, t0_noise)),
    rounded to the nearest integer and clamped to the scale. `t0_noise` (default: the
    persona's own) is the noise floor that keeps a judge non-deterministic at temperature 0.
    g is the judge's bias group's shared misjudgement of the item (`group_shift`; 0 without a
    group): an error the group's judges make together, which no number of samples averages
    away. Only the gullible persona looks for instructions inside the data; the others treat
    the data as inert text.
    """
    if persona.gullible:
        demanded = injected_score(data)
        if demanded is not None:
            return clamp(demanded, low, high)
    span = high - low
    quality = perceived_quality(persona, seed, criterion, output_text)
    if group is not None and group_error:
        quality += group_error * group_shift(seed, group, criterion, output_text)
    floor = persona.t0_noise if t0_noise is None else t0_noise
    noise = rng.gauss(0.0, 1.0) * persona.noise * span * effective_temperature(temperature, floor)
    raw = low + (quality + persona.bias) * span + noise
    return clamp(round_half_up(raw), low, high)
