"""How a finished batch ended, from its counts alone, and what to tell the user about each
judge that failed. Pure: the store calls `batch_outcome` when a batch's last verdict is stored,
and the CLI, the report and the Python API describe failures with `failure_paragraph`.

- `failed`: no verdict has a score (every judge failed on every cell).
- `degraded`: some verdict has no score, or some judge failed on at least
  DEGRADED_FAILED_SHARE of its judgments.
- `completed`: otherwise (a few failed judgments may remain; `jury status` counts them).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel

from jury.schemas.status import BatchState

# A judge failing on this share of its judgments (or more) makes the batch degraded: its
# verdicts rest on fewer judges than the panel was meant to have.
DEGRADED_FAILED_SHARE = 0.05


class JudgeTally(BaseModel):
    """One judge's stored judgments in a batch, and how many of them failed."""

    judged: int
    failed: int

    @property
    def failed_share(self) -> float:
        return self.failed / self.judged if self.judged else 0.0


def batch_outcome(n_verdicts: int, n_unscored: int, judges: Mapping[str, JudgeTally]) -> BatchState:
    """The end state of a batch whose every verdict is stored."""
    if n_verdicts and n_unscored >= n_verdicts:
        return BatchState.FAILED
    if n_unscored or any(
        t.failed and t.failed_share >= DEGRADED_FAILED_SHARE for t in judges.values()
    ):
        return BatchState.DEGRADED
    return BatchState.COMPLETED


class JudgeFailures(BaseModel):
    """A judge's failed judgments in a batch, by error kind, with one message to show."""

    judge: str
    model: str
    judged: int
    failed: int
    kinds: dict[str, int]
    sample_message: str

    @property
    def main_kind(self) -> str:
        return max(self.kinds.items(), key=lambda kv: kv[1])[0] if self.kinds else "error"


# What to check, per error kind (worker.llm_client.classify_error and the score parsers).
ADVICE: dict[str, str] = {
    "missing_key": (
        "set the variable the judge's `api_key_env` names in the workers' environment "
        "(keys are read where the call is made, never sent with the batch)"
    ),
    "auth": (
        "check the provider key the workers see (OPENAI_API_KEY, ANTHROPIC_API_KEY, … or the "
        "judge's `api_key_env`) and that it may use this model"
    ),
    "not_found": (
        "check the judge's `model` spelling (a LiteLLM string such as openai/gpt-4o-mini) and, "
        "for a self-hosted server, the model name it serves at `api_base`"
    ),
    "bad_request": (
        "the provider refused the request: check the model name, `max_tokens` and that the "
        "model takes chat messages"
    ),
    "connection": (
        "the workers could not reach the provider: check the judge's `api_base` (host, port, "
        "`/v1`) from the workers' machine, and any proxy or firewall"
    ),
    "timeout": (
        "the judge answered too slowly: raise the judge's `timeout_s`, lower the load "
        "(`rpm`, `max_in_flight`) or check the server's health"
    ),
    "rate_limited": (
        "the provider kept answering 429 after every retry: set the judge's `rpm`/`tpm` to the "
        "quota so that jury paces its calls, or raise the quota"
    ),
    "server_error": "the provider answered 5xx after every retry: check its status, then "
    "`jury resume BATCH` to judge these again",
    "provider_error": "the provider failed in an unexpected way: read the message, then "
    "`jury resume BATCH` to judge these again",
    "unparseable": (
        "the judge's answers held no score jury could read: check that the model follows "
        "instructions (a larger model, or a lower temperature)"
    ),
    "out_of_scale": (
        "the judge gave scores outside the dimension's scale: state the scale in a custom "
        "dimension's description, or use a model that follows instructions"
    ),
    "internal": "jury itself failed around the call: the workers' log has the traceback",
    "egress_refused": (
        "the workers' egress policy refused the call, and nothing was sent: change the "
        "setting the message names on the workers (JURY_EGRESS_ALLOW, JURY_KEY_HOSTS or "
        "JURY_PLAIN_VARS; docs/limits-and-security.md, Egress policy), or the judge's "
        "`api_base`/`api_key_env`, then `jury resume BATCH`"
    ),
}
DEFAULT_ADVICE = "read the message, then `jury resume BATCH` to judge these again"


def advice(kind: str, batch_id: str) -> str:
    return ADVICE.get(kind, DEFAULT_ADVICE).replace("BATCH", batch_id)


def failure_paragraph(failures: JudgeFailures, batch_id: str) -> str:
    """One paragraph about one failing judge: how many, which kinds, a message, what to check."""
    kinds = ", ".join(
        f"{kind} {count:,}" for kind, count in sorted(failures.kinds.items(), key=lambda kv: -kv[1])
    )
    share = failures.failed / failures.judged if failures.judged else 0.0
    message = " ".join(failures.sample_message.split())
    model = "" if failures.model == failures.judge else f" ({failures.model})"
    return (
        f"judge {failures.judge}{model} failed {failures.failed:,} of "
        f"{failures.judged:,} judgments ({share:.0%}): {kinds}. For example: {message!r}. "
        f"What to check: {advice(failures.main_kind, batch_id)}."
    )
