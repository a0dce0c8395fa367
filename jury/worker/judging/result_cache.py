"""Result caching: a judge call made once is not paid for again.

A successful sample's parsed answer is stored under a hash of everything that shapes the call:
the model, its endpoint, the judge's name, temperature and max_tokens, the full prompt messages,
the item's fields (all but its id: a field a prompt does not show yet cannot make two different
items share an answer), and the sample index. The same call in a later run (a re-run of the
batch, a resumed batch, another batch with the same items) takes the stored answer instead of
calling the judge: it is stored as a sample with `cached: true` and cost 0.

One entry per judge task: the samples of every dimension its call scored (combined), with their
pair scores (pairwise). The sample index is part of the key, so sample 0 and sample 1 of a cell
stay distinct draws (LiteLLM's own cache keys on model and messages only, which would hand every
sample of a cell the same answer). The judge's name is too, so two panel members on the same
model do not share draws either. Failed samples are never cached: a later run asks again.

Keys carry no secret: API keys, timeouts, weights and rate limits do not change an answer and
are left out."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable

from jury.schemas.batch import Item, Judge
from jury.schemas.results import CellSample
from jury.store.cache import CacheEntry, has_answers
from jury.store.sql import Sessions

log = logging.getLogger("jury.worker")

# Bump when the key's material changes meaning: old rows then simply stop matching.
CACHE_KEY_VERSION = 2


def cache_key(judge: Judge, item: Item, messages: list[list[dict[str, str]]], sample: int) -> str:
    """The SHA-256 (hex) of one task's calls (the messages of each call it makes)."""
    material = {
        # People's labels never reach the judge, so they are no part of the call's identity.
        "item": item.model_dump(mode="json", exclude={"id", "labels", "label"}),
        "v": CACHE_KEY_VERSION,
        "model": judge.model,
        "api_base": judge.api_base,
        "judge": judge.name,
        "temperature": judge.temperature,
        "max_tokens": judge.max_tokens,
        "messages": messages,
        "sample": sample,
    }
    # ASCII escapes: any text (lone surrogates included) encodes, and always to the same bytes.
    encoded = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(encoded.encode("ascii")).hexdigest()


def answer_to_keep(samples: list[CellSample]) -> tuple[CellSample, ...] | None:
    """What to cache from a task's samples: only real calls that scored every dimension."""
    if not samples or any(not s.result.ok or s.result.cached for s in samples):
        return None
    return tuple(samples)


def cached_samples(answer: list[CellSample], judge: Judge, sample: int) -> list[CellSample]:
    """The samples a cache hit stores: the answer as it was, no call made, nothing spent."""
    return [
        kept.model_copy(
            update={
                "result": kept.result.model_copy(
                    update={
                        "judge": judge.name,
                        "sample": sample,
                        "attempts": 0,
                        "latency_ms": 0.0,
                        "cost_usd": 0.0,
                        "cached": True,
                    }
                )
            }
        )
        for kept in answer
    ]


# A model the cache held no answer of is looked up again this often: a batch of another
# process may have started keeping its answers.
COLD_RECHECK_S = 30.0


class ResultCache:
    """The worker's side of the cache: what to keep, and which models to look answers up for.
    (Lookups are grouped by the pipeline; a cache that cannot be read is a miss, never a
    failed sample.)"""

    def __init__(self, sessions: Sessions, clock: Callable[[], float] = time.monotonic) -> None:
        self.sessions = sessions
        self.clock = clock
        self._warm: dict[str, tuple[float, bool]] = {}

    def worth_looking(self, model: str) -> bool:
        """Whether the cache holds any answer of `model`: a model judging for the first time
        (the common case of a new evaluation) costs no lookup per task."""
        now = self.clock()
        known = self._warm.get(model)
        if known is None or (not known[1] and now - known[0] > COLD_RECHECK_S):
            try:
                known = (now, has_answers(self.sessions, model))
            except Exception:
                log.exception("result cache unreadable; calling the judges")
                known = (now, False)
            self._warm[model] = known
        return known[1]

    def entry(self, key: str | None, judge: Judge, samples: list[CellSample]) -> CacheEntry | None:
        """What to cache from these samples (stored with them), if anything. A model with an
        answer kept is worth looking up from now on (a re-run follows a run)."""
        answer = answer_to_keep(samples)
        if key is None or answer is None:
            return None
        self._warm[judge.model] = (self.clock(), True)
        return CacheEntry(key, judge.model, answer)
