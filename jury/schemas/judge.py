"""One judge of the panel, as the batch file gives it: a model (or a heuristic), how often it
is asked, at what price, and how its calls reach the provider. Pure validation."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from jury.schemas.heuristics import Heuristic, heuristic_judge_defaults
from jury.schemas.judge_prompts import ScoringTemplate
from jury.schemas.placeholders import has_placeholder, placeholder_problem
from jury.schemas.strict import MAX_MAGNITUDE, MAX_NAME_CHARS, MAX_PROMPT_CHARS, MAX_URL_CHARS
from jury.schemas.strict import StrictModel as _Strict

# The plan's `provider` names, mapped to the model each one meant there.
PROVIDER_DEFAULT_MODELS: dict[str, str] = {
    "openai": "openai/gpt-4o-mini",
    "gemini": "gemini/gemini-2.0-flash",
    "anthropic": "anthropic/claude-3-5-sonnet-20241022",
}
DEFAULT_TEMPERATURE = 0.8
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JUDGE_NAME = re.compile(r"[A-Za-z0-9_.:/@+-]+")


class Judge(_Strict):
    """One model on the panel. `name` identifies it in results (defaults to `model`)."""

    model: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    name: str = Field(default="", max_length=MAX_NAME_CHARS)
    n: int = Field(default=3, ge=1, le=100)
    temperature: float = Field(default=DEFAULT_TEMPERATURE, ge=0, le=2)
    weight: float = Field(default=1.0, gt=0, le=MAX_MAGNITUDE)
    enabled: bool = True
    # With `adaptive`: called only for the cells its first round leaves uncertain.
    reserve: bool = False
    rpm: int | None = Field(default=None, gt=0)
    tpm: int | None = Field(default=None, gt=0)
    max_in_flight: int | None = Field(default=None, gt=0)
    api_base: str | None = Field(default=None, max_length=MAX_URL_CHARS)
    api_key_env: str | None = Field(default=None, max_length=MAX_NAME_CHARS)
    # An OpenAI-compatible server at `api_base` is called through jury's own HTTP client
    # (jury.worker.calls.openai_wire, about half LiteLLM's CPU per call); "litellm": through the
    # OpenAI SDK under LiteLLM, as a plain LiteLLM script calls it.
    http_client: Literal["jury", "litellm"] = "jury"
    timeout_s: float = Field(default=60.0, gt=0, le=600)
    max_tokens: int = Field(default=400, ge=16, le=32000)
    # Ask for the reasoning before the score ("reason first"): the judge reasons, then scores.
    # Give it max_tokens enough for both: an answer cut before its score is unparseable.
    reasoning_first: bool = False
    # How it answers, and its own prompt template (schemas.judge_prompts).
    scoring: ScoringTemplate = "likert"
    prompt_template: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    # Prices for models LiteLLM's price map lacks (self-hosted, new, or behind a proxy).
    input_cost_per_token: float | None = Field(default=None, ge=0, le=1)
    output_cost_per_token: float | None = Field(default=None, ge=0, le=1)
    # Through the provider's Batch API (docs/batch-api.md): about half the price, within a day.
    batch_api: bool = False
    batch_max_requests: int = Field(default=50_000, ge=1, le=50_000)
    batch_max_wait_s: float = Field(default=86_400.0, gt=0, le=7 * 86_400)
    # What a request the provider's batch failed does: the next provider batch, or a live call.
    batch_fallback_live: bool = False
    # The batch price as a fraction of the live one, where no batch price is known.
    batch_price_factor: float = Field(default=0.5, gt=0, le=1)
    # Present: no LLM, a measure of the output (schemas.heuristics); model: heuristic/<kind>.
    heuristic: Heuristic | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_provider(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"model": data}
        data = heuristic_judge_defaults(data)
        if isinstance(data, dict) and "provider" in data:
            data = dict(data)
            provider = data.pop("provider")
            if "model" not in data:
                if provider not in PROVIDER_DEFAULT_MODELS:
                    known = ", ".join(sorted(PROVIDER_DEFAULT_MODELS))
                    raise ValueError(
                        f"unknown provider {provider!r} (known: {known}); name a `model` instead"
                    )
                data["model"] = PROVIDER_DEFAULT_MODELS[provider]
        return data

    @model_validator(mode="after")
    def _check(self) -> Judge:
        # `${VAR}` stays as written here (schemas.placeholders): only a well-formed
        # placeholder is checked; the producer validates an expanded copy as well.
        for field in ("model", "api_base", "api_key_env"):
            value = getattr(self, field)
            problem = value is not None and has_placeholder(value) and placeholder_problem(value)
            if problem:
                raise ValueError(f"{field}: {problem}")
        if not self.name:
            if has_placeholder(self.model):
                raise ValueError(
                    f"judge model {self.model!r} holds a placeholder: give the judge a `name`, "
                    "which identifies it in results whatever the placeholder expands to"
                )
            object.__setattr__(self, "name", self.model)
        if not _JUDGE_NAME.fullmatch(self.name):
            raise ValueError(
                f"judge name {self.name!r} may hold only ASCII letters, digits and _.:/@+-"
            )
        if (
            self.api_key_env is not None
            and not has_placeholder(self.api_key_env)
            and not _ENV_NAME.fullmatch(self.api_key_env)
        ):
            raise ValueError(
                f"api_key_env must name an environment variable, not hold a key "
                f"(got a value of {len(self.api_key_env)} characters)"
            )
        if self.batch_api and not (self.api_base or self.model.startswith("openai/")):
            raise ValueError(
                f"judge {self.name}: batch_api needs an OpenAI-format endpoint (an `openai/` "
                "model, or an `api_base` serving /files and /batches)"
            )
        base = self.api_base
        if base is not None and not has_placeholder(base) and not _is_http_url(base):
            raise ValueError(f"api_base {base!r} must be an http(s) URL")
        return self


def _is_http_url(text: str) -> bool:
    return text.startswith(("http://", "https://")) and text.isprintable() and " " not in text
