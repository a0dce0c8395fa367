"""N outputs per item (ragdiff's list of runs): `outputs: {name: text, …}` in a pairwise batch.

Loading expands such an item into one ordinary pair item per pair of its outputs (every pair
once, in the order the names are written; each pair shown in both orders unless `pairwise.
orders: single`), so the one pairwise pipeline judges them: one cell per (item, pair,
dimension). A pair item's id names its item and its two sides, `q1 [bm25 vs dense]`; the
worker reads the sides' names from it (`name_a`, `name_b` of the record) and the records are
ranked back per item and per output while they stream past (`OutputRankings`).

Pure functions and models only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import combinations
from statistics import fmean
from typing import Any, NamedTuple

from pydantic import BaseModel

from jury.schemas.pairwise import PairwiseOutcome

MAX_OUTPUTS = 20  # 190 pairs per item and dimension
OUTPUT_NAME = re.compile(r"[A-Za-z0-9_.-]{1,40}")
_PAIR_ID = re.compile(
    r"(?P<item>.+) \[(?P<a>[A-Za-z0-9_.-]{1,40}) vs (?P<b>[A-Za-z0-9_.-]{1,40})\]"
)
# Fields of an item that hold or judge its output(s): not allowed beside `outputs`.
_PAIR_FIELDS = ("output", "output_a", "output_b", "label", "labels")


class PairOf(NamedTuple):
    """What a pair item's id names: the item, and its outputs shown as A and as B."""

    item: str
    a: str
    b: str


def pair_item_id(item: str, a: str, b: str) -> str:
    return f"{item} [{a} vs {b}]"


def pair_of(item_id: str) -> PairOf | None:
    """The item and sides a pair item's id names, or None for any other item id."""
    found = _PAIR_ID.fullmatch(item_id)
    return PairOf(found["item"], found["a"], found["b"]) if found else None


def pair_names(item_id: str) -> tuple[str, str] | None:
    """The names of a pair item's sides (A's, B's), or None for any other item."""
    pair = pair_of(item_id)
    return (pair.a, pair.b) if pair else None


def expand_outputs(fields: dict[str, Any], pairwise: bool) -> list[dict[str, Any]]:
    """A raw item as the raw pair items it stands for: itself unless it has `outputs`. A
    ValueError says what is wrong, in one sentence."""
    if "outputs" not in fields:
        if pairwise and isinstance(fields.get("id"), str) and pair_of(fields["id"]):
            raise ValueError(
                f"item id {fields['id']!r} has the form `item [a vs b]`, which names the pairs "
                "of an item's `outputs`: choose another id"
            )
        return [fields]
    if not pairwise:
        raise ValueError(
            "only a pairwise batch compares an item's `outputs`: add a `pairwise:` section to "
            "the batch file, or give the item one `output`"
        )
    outputs = fields["outputs"]
    if not isinstance(outputs, dict) or not 2 <= len(outputs) <= MAX_OUTPUTS:
        raise ValueError(
            f"outputs must map 2 to {MAX_OUTPUTS} names to the texts to compare, "
            "e.g. {bm25: '…', dense: '…'}"
        )
    bad = [str(n) for n in outputs if not isinstance(n, str) or not OUTPUT_NAME.fullmatch(n)]
    if bad:
        raise ValueError(
            f"output names {bad} may hold only ASCII letters, digits and _.- (at most 40)"
        )
    texts = [n for n, text in outputs.items() if not isinstance(text, str)]
    if texts:
        raise ValueError(f"the outputs {texts} are not text")
    clash = [f for f in _PAIR_FIELDS if f in fields]
    if clash:
        raise ValueError(f"an item with `outputs` has no {', '.join(clash)}")
    rest = {k: v for k, v in fields.items() if k != "outputs"}
    item_id = str(rest.get("id", ""))
    return [
        {**rest, "id": pair_item_id(item_id, a, b), "output_a": outputs[a], "output_b": outputs[b]}
        for a, b in combinations(outputs, 2)
    ]


class OutputStanding(BaseModel):
    """One output's record against the others: wins, losses and ties over its pairs' records,
    and its mean preference (points of the scale by which the panel preferred it)."""

    output: str
    rank: int
    wins: int
    losses: int
    ties: int
    undecided: int
    win_rate: float | None  # (wins + ties / 2) / decided
    mean_preference: float | None


@dataclass
class _Standing:
    wins: int = 0
    losses: int = 0
    ties: int = 0
    undecided: int = 0
    preferences: list[float] = field(default_factory=list)

    def add(self, outcome: str | None, preference: float | None) -> None:
        if outcome is None:
            self.undecided += 1
        elif outcome == "win":
            self.wins += 1
        elif outcome == "loss":
            self.losses += 1
        else:
            self.ties += 1
        if preference is not None:
            self.preferences.append(preference)

    def figures(self) -> dict[str, Any]:
        decided = self.wins + self.losses + self.ties
        return {
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
            "undecided": self.undecided,
            "win_rate": round((self.wins + self.ties / 2) / decided, 4) if decided else None,
            "mean_preference": round(fmean(self.preferences), 4) if self.preferences else None,
        }


def ranked(standings: dict[str, _Standing]) -> list[OutputStanding]:
    """Best first: by win rate, then mean preference, then name; equal figures share a rank."""
    rows = [{"output": name, **s.figures()} for name, s in standings.items()]

    def key(row: dict[str, Any]) -> tuple[float, float]:
        return (-(row["win_rate"] or 0.0), -(row["mean_preference"] or 0.0))

    rows.sort(key=lambda r: (*key(r), r["output"]))
    result: list[OutputStanding] = []
    for position, row in enumerate(rows):
        tied = position and key(rows[position - 1]) == key(row)
        rank = result[-1].rank if tied else position + 1
        result.append(OutputStanding(rank=rank, **row))
    return result


_SIDE_RESULT = {"A": ("win", "loss"), "B": ("loss", "win"), "tie": ("tie", "tie")}


@dataclass
class OutputRankings:
    """Per item and over the batch: each output's standing, from the pair records streaming
    past (every dimension's record counts once)."""

    items: dict[str, dict[str, _Standing]] = field(default_factory=dict)
    overall: dict[str, _Standing] = field(default_factory=dict)

    def add(self, item_id: str, outcome: PairwiseOutcome) -> None:
        pair = pair_of(item_id)
        if pair is None:
            return
        a_result, b_result = _SIDE_RESULT[outcome.winner] if outcome.winner else (None, None)
        preference = outcome.preference
        for standings in (self.items.setdefault(pair.item, {}), self.overall):
            standings.setdefault(pair.a, _Standing()).add(a_result, preference)
            standings.setdefault(pair.b, _Standing()).add(
                b_result, None if preference is None else -preference
            )

    @property
    def empty(self) -> bool:
        return not self.overall

    def per_item(self) -> Iterator[tuple[str, list[OutputStanding]]]:
        for item, standings in self.items.items():
            yield item, ranked(standings)

    def report(self) -> dict[str, Any]:
        """The `outputs` part of the summary: batch totals per output, and each item's
        ranking."""
        return {
            "overall": [s.model_dump() for s in ranked(self.overall)],
            "items": {item: [s.model_dump() for s in rows] for item, rows in self.per_item()},
        }
