"""OpenAI's files and batches endpoints over plain HTTP (httpx), for judges with `batch_api`.

LiteLLM has these too (`create_file`, `create_batch`, `retrieve_batch`, `list_batches`,
`cancel_batch`, sync and async, with an `api_base`), and for the OpenAI format they wrap the
OpenAI SDK around the same five requests. jury makes them itself: the poller runs in a worker
thread of its own, not on the event loop; each request gets one explicit timeout and no
retries of the SDK's (the poller's own schedule is the retry); a streamed output file is read
line by line rather than whole; and errors map onto jury's transient/permanent kinds here,
with the key redacted, in one small module.

Every request passes the workers' egress policy (jury.worker.calls.guarded_transport): the
key goes only where JURY_KEY_HOSTS lets it, no redirect is followed, and each reply is read up
to a bound (an output file's lines one at a time, each up to MAX_LINE_BYTES).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from jury.errors import EgressRefused, PermanentJudgeError, TransientJudgeError
from jury.schemas.batch import Judge
from jury.schemas.egress import EgressPolicy, plan_model_call
from jury.schemas.placeholders import call_settings, redact, taken_variables
from jury.schemas.provider_batches import COMPLETIONS_ENDPOINT, METADATA_KEY
from jury.worker.calls.egress_guard import CallGuard, call_key, environment_policy
from jury.worker.calls.guarded_transport import REPLY_LIMIT, GuardedSyncTransport, ReplyRefused

OPENAI_BASE = "https://api.openai.com/v1"
TIMEOUT_S = 120.0
# An output file is read as a stream, a line at a time: each line (one request's answer) at
# most this long, the whole file at most MAX_FILE_BYTES.
MAX_LINE_BYTES = 8 * 1024 * 1024
MAX_FILE_BYTES = 16 * 1024**3


def endpoint_address(judge: Judge) -> tuple[str, str]:
    """The base URL a judge's batches go to and the model name the provider knows."""
    expanded, _ = call_settings(judge, os.environ)
    return (expanded.api_base or OPENAI_BASE).rstrip("/"), expanded.model.removeprefix("openai/")


@dataclass(frozen=True)
class Endpoint:
    """Where a judge's batches go, the model name the provider knows, and the key that goes
    with them, as the egress policy allows (`guard`: what every request is checked against)."""

    base: str
    key: str
    model: str
    secrets: tuple[str, ...]
    guard: CallGuard

    @classmethod
    def of(cls, judge: Judge, egress: EgressPolicy | None = None) -> Endpoint:
        """EgressRefused when the policy refuses the endpoint or its key; PermanentJudgeError
        when the key's variable is unset."""
        env = os.environ
        placeholders = (*taken_variables(judge.model, env), *taken_variables(judge.api_base, env))
        expanded, secrets = call_settings(judge, env)
        base, model = endpoint_address(judge)
        policy = egress or environment_policy()
        what = f"judge {judge.name} (Batch API)"
        try:
            call = plan_model_call(policy, what, "openai", base, expanded.api_key_env, placeholders)
        except EgressRefused as exc:  # the base's host may be a placeholder's value
            raise EgressRefused(redact(str(exc), secrets)) from None
        key = call_key(call, expanded.api_key_env, what) or ""
        return cls(base, key, model, (key, *secrets), CallGuard(policy, call.carried, what))


def request_line(custom_id: str, endpoint: Endpoint, params: dict[str, Any], messages: Any) -> str:
    """One line of the batch input file, in OpenAI's format; `params` are what a live call
    would send besides its messages (jury.worker.calls.llm_client.sampling_params)."""
    body = {"model": endpoint.model, "messages": messages, **params}
    line = {"custom_id": custom_id, "method": "POST", "url": COMPLETIONS_ENDPOINT, "body": body}
    return json.dumps(line, ensure_ascii=False)


class BatchClient:
    """One provider endpoint's files and batches."""

    def __init__(self, endpoint: Endpoint, client: httpx.Client | None = None) -> None:
        self.endpoint = endpoint
        transport = GuardedSyncTransport(httpx.HTTPTransport(), endpoint.guard)
        self.client = client or httpx.Client(timeout=TIMEOUT_S, transport=transport)

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.endpoint.key}"}
        url = f"{self.endpoint.base}{path}"
        try:
            response = self.client.request(method, url, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            message = redact(f"{type(exc).__name__}: {exc}", self.endpoint.secrets)
            raise TransientJudgeError(message, kind="connection") from None
        except ReplyRefused as exc:
            raise TransientJudgeError(f"{method} {path}: {exc}", kind="server_error") from None
        if response.status_code >= 400:
            message = redact(
                f"{method} {path}: {response.status_code} {response.text[:300]}",
                self.endpoint.secrets,
            )
            if response.status_code in (408, 409, 429) or response.status_code >= 500:
                raise TransientJudgeError(message, kind="server_error")
            raise PermanentJudgeError(message, kind="bad_request")
        return response

    def upload(self, name: str, content: bytes) -> str:
        files = {"file": (name, content, "application/jsonl")}
        response = self._send("POST", "/files", data={"purpose": "batch"}, files=files)
        return str(response.json()["id"])

    def create(self, file_id: str, jury_id: str) -> dict[str, Any]:
        body = {
            "input_file_id": file_id,
            "endpoint": COMPLETIONS_ENDPOINT,
            "completion_window": "24h",
            "metadata": {METADATA_KEY: jury_id},
        }
        created: dict[str, Any] = self._send("POST", "/batches", json=body).json()
        return created

    def retrieve(self, provider_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self._send("GET", f"/batches/{provider_id}").json()
        return found

    def cancel(self, provider_id: str) -> dict[str, Any]:
        done: dict[str, Any] = self._send("POST", f"/batches/{provider_id}/cancel").json()
        return done

    def find(self, jury_id: str, pages: int = 20) -> dict[str, Any] | None:
        """The provider's batch carrying our id in its metadata (newest first), if any."""
        after: str | None = None
        for _ in range(pages):
            params: dict[str, Any] = {"limit": 100}
            if after:
                params["after"] = after
            page = self._send("GET", "/batches", params=params).json()
            for batch in page.get("data") or []:
                if (batch.get("metadata") or {}).get(METADATA_KEY) == jury_id:
                    found: dict[str, Any] = batch
                    return found
            if not page.get("has_more") or not page.get("data"):
                return None
            after = page.get("last_id") or page["data"][-1]["id"]
        return None

    def lines(self, file_id: str | None) -> Iterator[dict[str, Any]]:
        """The lines of an output or error file, streamed."""
        if not file_id:
            return
        url = f"{self.endpoint.base}/files/{file_id}/content"
        headers = {"Authorization": f"Bearer {self.endpoint.key}"}
        whole = {REPLY_LIMIT: MAX_FILE_BYTES}
        try:
            with self.client.stream("GET", url, headers=headers, extensions=whole) as response:
                if response.status_code >= 400:
                    raise TransientJudgeError(
                        f"GET file {file_id}: {response.status_code}", kind="server_error"
                    )
                for text in bounded_lines(response.iter_bytes(), MAX_LINE_BYTES):
                    if text.strip():
                        yield json.loads(text)
        except httpx.HTTPError as exc:
            message = redact(f"{type(exc).__name__}: {exc}", self.endpoint.secrets)
            raise TransientJudgeError(message, kind="connection") from None
        except ReplyRefused as exc:
            raise TransientJudgeError(f"GET file {file_id}: {exc}", kind="server_error") from None

    def close(self) -> None:
        self.client.close()


def bounded_lines(chunks: Iterator[bytes], max_line: int) -> Iterator[bytes]:
    """The lines of a stream of bytes; a line longer than `max_line` fails the reading
    (TransientJudgeError) rather than filling the memory."""
    pending = bytearray()
    for chunk in chunks:
        first, *rest = chunk.split(b"\n")
        pending += first
        for line in rest:
            yield bytes(pending)
            pending = bytearray(line)
        if len(pending) > max_line:
            raise TransientJudgeError(
                f"a line of the output file is longer than {max_line >> 20} MiB",
                kind="server_error",
            )
    if pending:
        yield bytes(pending)
