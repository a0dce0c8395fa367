"""Provider batches (docs/batch-api.md): the names, states and prices the producer, the worker
and the store share about judges that go through a provider's Batch API."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jury.schemas.batch import Judge

# Our own states of a provider batch, in order. `submitting`: the intent is stored (its
# requests claimed) but the provider's id is not yet known; `open`: the provider has it;
# `ended`: the provider finished it (completed, failed, expired or cancelled) and its lines
# are being stored; `stored`: every line is stored (or sent on to the next batch).
SUBMITTING, OPEN, ENDED, STORED = "submitting", "open", "ended", "stored"
UNFINISHED = (SUBMITTING, OPEN, ENDED)
# The provider's final states (OpenAI's names).
PROVIDER_FINAL = frozenset({"completed", "failed", "expired", "cancelled"})
# A request's states: waiting for a provider batch, in one, or its sample stored.
PENDING, SENT, DONE = "pending", "sent", "done"
# The metadata key a provider batch carries our id under (looked up after a crash).
METADATA_KEY = "jury_provider_batch"
COMPLETIONS_ENDPOINT = "/v1/chat/completions"


def custom_id(
    batch_id: str, item_id: str, dimension: str, judge: str, sample: int, call: int
) -> str:
    """The request's `custom_id`: it names the sample (and which of the task's calls it is)."""
    return f"{batch_id}/{item_id}/{dimension}/{judge}/{sample}/{call}"


def batch_prices(
    judge: Judge, live: tuple[float, float] | None, entry: Mapping[str, Any] | None
) -> tuple[float, float] | None:
    """(input, output) USD per token through the Batch API: the judge's declared prices times
    its `batch_price_factor`, else LiteLLM's batch prices for the model, else its live ones
    times the factor; None if unknown."""
    factor = judge.batch_price_factor
    declared = judge.input_cost_per_token is not None or judge.output_cost_per_token is not None
    if not declared and entry and "input_cost_per_token_batches" in entry:
        return float(entry["input_cost_per_token_batches"]), float(
            entry.get("output_cost_per_token_batches") or 0.0
        )
    if live is None:
        return None
    return live[0] * factor, live[1] * factor


@dataclass(frozen=True)
class ProviderBatchInfo:
    """What `jury status` shows of one provider batch."""

    id: str
    judge: str
    model: str
    state: str
    provider_id: str | None
    provider_status: str | None
    requests: int
    done: int
    failed: int
    created_at: datetime

    def age_s(self, now: datetime) -> float:
        created = self.created_at
        if created.tzinfo is None:
            created = created.replace(tzinfo=now.tzinfo)
        return max(0.0, (now - created).total_seconds())
