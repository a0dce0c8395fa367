"""Result caching: a judge call made once is not paid for again.

A successful sample's parsed answer is stored under a hash of everything that shapes the
call: the model, its endpoint, the judge's name, temperature and max_tokens, the full prompt
messages, the item's fields (all but its id: a field a prompt does not show yet cannot make
two different items share an answer), and the sample index. The same call in a later run (a
re-run of the batch, a resumed batch, another batch with the same items) takes the stored
answer instead of calling the judge: it is stored as a sample with `cached: true` and cost 0.

The sample index is part of the key, so sample 0 and sample 1 of a cell stay distinct draws
(LiteLLM's own cache keys on model and messages only, which would hand every sample of a cell
the same answer). The judge's name is too, so two panel members on the same model do not
share draws either. Failed samples are never cached: a later run asks again.

Keys carry no secret: API keys, timeouts, weights and rate limits do not change an answer and
are left out.
"""

from __future__ import annotations

import hashlib
import json
import logging

from schemas.batch import BatchConfig, Dimension, Item, Judge
from schemas.results import SampleResult
from store.cache import CachedAnswer, CacheEntry, find_cached_answer
from store.sql import Sessions
from worker.prompts import build_messages

log = logging.getLogger("jury.worker")

# Bump when the key's material changes meaning: old rows then simply stop matching.
CACHE_KEY_VERSION = 1


def cache_key(judge: Judge, item: Item, messages: list[dict[str, str]], sample: int) -> str:
    """The SHA-256 (hex) of one call's identity."""
    material = {
        "item": item.model_dump(mode="json", exclude={"id"}),
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


def answer_to_keep(result: SampleResult) -> CachedAnswer | None:
    """What to cache from a judged sample: only a real, successful call."""
    if not result.ok or result.cached or result.score is None:
        return None
    return CachedAnswer(
        score=result.score,
        reasoning=result.reasoning,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cost_usd=result.cost_usd,
    )


def cached_sample(answer: CachedAnswer, judge: Judge, sample: int) -> SampleResult:
    """The sample a cache hit stores: the answer as it was, no call made, nothing spent."""
    return SampleResult(
        judge=judge.name,
        sample=sample,
        score=answer.score,
        reasoning=answer.reasoning,
        attempts=0,
        latency_ms=0.0,
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        cost_usd=0.0,
        cached=True,
    )


class ResultCache:
    """The worker's side of the cache. A cache that cannot be read or written is a miss, never
    a failed sample: the judge call is what matters."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    def lookup(
        self, config: BatchConfig, judge: Judge, dimension: Dimension, item: Item, sample: int
    ) -> tuple[str | None, SampleResult | None]:
        """(key, hit): the key to keep the answer under (None: the batch does not cache) and
        the stored sample when this exact call was answered before."""
        if not config.cache:
            return None, None
        key = cache_key(judge, item, build_messages(item, dimension), sample)
        try:
            answer = find_cached_answer(self.sessions, key)
        except Exception:
            log.exception("result cache lookup failed; calling the judge")
            return key, None
        return key, None if answer is None else cached_sample(answer, judge, sample)

    def entry(self, key: str | None, judge: Judge, result: SampleResult) -> CacheEntry | None:
        """What to cache from this result (stored with the sample), if anything."""
        answer = answer_to_keep(result)
        return None if key is None or answer is None else CacheEntry(key, judge.model, answer)
