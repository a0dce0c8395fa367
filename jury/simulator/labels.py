"""Simulated people: labels drawn from the simulator's latent truth plus rater noise.

Judges of the simulator score an output from its latent quality (simulator.personas); a person
here does the same without a persona's bias, with their own noise, and answers in whole
points. Several raters per item average their points, as a labelling team would. The labels
are what `jury agreement` compares judges with, and what a calibration is fitted to.

    python -m jury.simulator.labels items.jsonl --dimension relevance --seed 11 > labelled.jsonl

reads items (JSONL, as a batch names them) and writes them back with `labels` (or, for
pairwise items, `label`) filled in for the simulator's `--seed`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from typing import Any, Literal

from jury.simulator.personas import clamp, latent_quality, round_half_up

Side = Literal["A", "B", "tie"]
DEFAULT_RATER_NOISE = 0.1  # standard deviation, as a fraction of the scale
DEFAULT_RATERS = 3  # people per item, whose whole points are averaged


def human_score(
    seed: int,
    criterion: str,
    output_text: str,
    low: float,
    high: float,
    *,
    rng: random.Random,
    rater_noise: float = DEFAULT_RATER_NOISE,
    raters: int = DEFAULT_RATERS,
) -> float:
    """The mean of `raters` whole-point ratings, each the latent truth on the scale plus
    Normal(0, rater_noise × range). `output_text` as the simulator reads it (stripped)."""
    span = high - low
    truth = low + latent_quality(seed, criterion, output_text.strip()) * span
    points = [
        clamp(round_half_up(truth + rng.gauss(0.0, rater_noise * span)), low, high)
        for _ in range(max(1, raters))
    ]
    return sum(points) / len(points)


def preferred_side(
    seed: int,
    criterion: str,
    output_a: str,
    output_b: str,
    low: float,
    high: float,
    *,
    rng: random.Random,
    rater_noise: float = DEFAULT_RATER_NOISE,
    raters: int = DEFAULT_RATERS,
) -> Side:
    """The side people prefer: each rater scores both outputs; a tie when the means agree."""
    a = human_score(
        seed, criterion, output_a, low, high, rng=rng, rater_noise=rater_noise, raters=raters
    )
    b = human_score(
        seed, criterion, output_b, low, high, rng=rng, rater_noise=rater_noise, raters=raters
    )
    return "tie" if a == b else ("A" if a > b else "B")


def label_item(
    item: dict[str, Any],
    dimensions: Sequence[tuple[str, float, float]],
    seed: int,
    rng: random.Random,
    rater_noise: float = DEFAULT_RATER_NOISE,
    raters: int = DEFAULT_RATERS,
) -> dict[str, Any]:
    """The item (a batch's JSON object) with people's labels for `dimensions` (name, low,
    high): scores for a single output, preferred sides for a pair."""
    labels: dict[str, float | str] = {}
    for name, low, high in dimensions:
        if "output_a" in item and "output_b" in item:
            labels[name] = preferred_side(
                seed,
                name,
                item["output_a"],
                item["output_b"],
                low,
                high,
                rng=rng,
                rater_noise=rater_noise,
                raters=raters,
            )
        else:
            labels[name] = human_score(
                seed,
                name,
                item["output"],
                low,
                high,
                rng=rng,
                rater_noise=rater_noise,
                raters=raters,
            )
    return {**item, "labels": labels}


def _dimension(text: str) -> tuple[str, float, float]:
    """`name` (scale 1..5) or `name:low:high`."""
    name, *scale = text.split(":")
    if len(scale) not in (0, 2) or not name:
        raise argparse.ArgumentTypeError(f"expected NAME or NAME:LOW:HIGH, got {text!r}")
    try:
        low, high = (float(scale[0]), float(scale[1])) if scale else (1.0, 5.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the scale of {text!r} must be two numbers") from None
    if low >= high:
        raise argparse.ArgumentTypeError(f"the scale of {text!r} must have LOW below HIGH")
    return name, low, high


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jury.simulator.labels",
        description="Add simulated people's labels (latent truth + rater noise) to items.",
    )
    parser.add_argument("items", type=argparse.FileType("r"), help="a JSONL items file, or -")
    parser.add_argument(
        "--dimension",
        type=_dimension,
        action="append",
        required=True,
        help="NAME or NAME:LOW:HIGH (repeatable); the simulator's criterion and scale",
    )
    parser.add_argument("--seed", type=int, default=0, help="the simulator's --seed")
    parser.add_argument("--rater-noise", type=float, default=DEFAULT_RATER_NOISE)
    parser.add_argument("--raters", type=int, default=DEFAULT_RATERS)
    parser.add_argument("--label-seed", type=int, default=0, help="seed of the raters' noise")
    args = parser.parse_args(argv)
    rng = random.Random(args.label_seed)
    for line in args.items:
        if line.strip():
            item = label_item(
                json.loads(line), args.dimension, args.seed, rng, args.rater_noise, args.raters
            )
            sys.stdout.write(json.dumps(item) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
