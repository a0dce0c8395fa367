"""Random draws that do not depend on the order requests arrive in.

A worker sends a cell's samples at once, and their requests reach the simulator in whatever
order the worker's event loop and the network give; one shared random stream handed its
draws out in that order, so the same seed gave other verdicts from run to run (a demo read
HIGH 13 / PARTIAL 7, then 11 / 9). Here each draw is a function of the seed, the request's
content and how many times that very request was answered before: the k-th answer to a
request gets the k-th draw, whichever of the identical requests (the samples of one cell)
arrives k-th. A judge's samples are then the same set of scores in every run, so its mean,
median and spread are too.
"""

from __future__ import annotations

import hashlib
import random

# Requests remembered per stream; past this the oldest is forgotten (the first answer to it
# again starts over): 1M requests hold ~150 MB, more than any benchmark here sends.
MAX_REMEMBERED = 1_000_000


def request_key(model: str, prompt_text: str, temperature: float) -> bytes:
    """What makes two requests the same question: the model asked, its prompt, temperature."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (model, prompt_text, repr(temperature)):
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.digest()


class Draws:
    """One stream of per-request random generators (the scores' noise, or the faults)."""

    def __init__(self, seed: int, purpose: str, remembered: int = MAX_REMEMBERED) -> None:
        self.seed, self.purpose, self.remembered = seed, purpose, remembered
        self._answered: dict[bytes, int] = {}

    def next(self, key: bytes) -> random.Random:
        """The generator for the next answer to the request `key`."""
        turn = self._answered.pop(key, 0)
        self._answered[key] = turn + 1  # re-inserted: the dict's order is least recent first
        if len(self._answered) > self.remembered:
            del self._answered[next(iter(self._answered))]
        return random.Random(f"{self.purpose}:{self.seed}:{key.hex()}:{turn}")
