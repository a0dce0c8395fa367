"""What LiteLLM knows about models, read from the JSON files the litellm package ships, without
importing litellm (the producer never does: it costs seconds and a hundred MiB)."""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any


def _litellm_file(name: str) -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")  # locates the package without importing it
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / name
        if path.exists():
            loaded: dict[str, Any] = json.loads(path.read_text())
            return loaded
    return {}


@functools.lru_cache(maxsize=1)
def price_map() -> dict[str, Any]:
    return _litellm_file("model_prices_and_context_window_backup.json")


@functools.lru_cache(maxsize=1)
def known_providers() -> frozenset[str]:
    providers = set(_litellm_file("provider_endpoints_support_backup.json").get("providers", {}))
    providers |= {
        entry["litellm_provider"]
        for entry in price_map().values()
        if isinstance(entry, dict) and isinstance(entry.get("litellm_provider"), str)
    }
    return frozenset(providers)


def model_prices(model: str) -> tuple[float, float] | None:
    """(input, output) USD per token, or None if the model is not in the price map. The same
    file and the same lookup (the name as given, then without its provider prefix) as a
    worker's budget (jury.worker.calls.llm_client.model_prices, on `litellm.model_cost`, which
    LITELLM_LOCAL_MODEL_COST_MAP loads from this very file): the dry run's estimate and the
    budget's agree."""
    prices = price_map()
    for key in (model, model.split("/", 1)[-1]):
        entry = prices.get(key)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            return float(entry["input_cost_per_token"] or 0.0), float(
                entry.get("output_cost_per_token") or 0.0
            )
    return None


def model_problem(model: str) -> str | None:
    """Why LiteLLM could not route `model`, or None when it can."""
    providers = known_providers()
    if not providers:
        return None  # no catalogue to check against: let the call decide
    if "/" in model:
        provider = model.split("/", 1)[0]
        if provider not in providers:
            return (
                f"unknown provider {provider!r} in model {model!r}; LiteLLM model strings look "
                "like openai/gpt-4o-mini or anthropic/claude-3-5-sonnet-20241022"
            )
        return None
    if model not in price_map():
        return (
            f"LiteLLM cannot tell the provider of {model!r}: write it as provider/model "
            f"(e.g. openai/{model})"
        )
    return None


def model_provider(model: str) -> str:
    """The LiteLLM provider that routes `model` ("" when the catalogue cannot tell): its
    prefix, or the price map's provider of a bare name (`gpt-4o-mini` is OpenAI's)."""
    if "/" in model:
        return model.split("/", 1)[0]
    entry = price_map().get(model)
    provider = entry.get("litellm_provider") if isinstance(entry, dict) else None
    return provider if isinstance(provider, str) else ""
