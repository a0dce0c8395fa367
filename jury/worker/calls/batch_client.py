"""OpenAI's files and batches endpoints over plain HTTP (httpx), for judges with `batch_api`.

LiteLLM has these too (`create_file`, `create_batch`, `retrieve_batch`, `list_batches`,
`cancel_batch`, sync and async, with an `api_base`), and for the OpenAI format they wrap the
OpenAI SDK around the same five requests. jury makes them itself: the poller runs in a worker
thread of its own, not on the event loop; each request gets one explicit timeout and no
retries of the SDK's (the poller's own schedule is the retry); a streamed output file is read
line by line rather than whole; and errors map onto jury's transient/permanent kinds here,
with the key redacted, in one small module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from jury.errors import PermanentJudgeError, TransientJudgeError
from jury.schemas.batch import Judge
from jury.schemas.placeholders import call_settings, redact
from jury.schemas.provider_batches import COMPLETIONS_ENDPOINT, METADATA_KEY

OPENAI_BASE = "https://api.openai.com/v1"
PLACEHOLDER_KEY = "no-key-needed"
TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Endpoint:
    """Where a judge's batches go, and the model name the provider knows."""

    base: str
    key: str
    model: str
    secrets: tuple[str, ...]

    @classmethod
    def of(cls, judge: Judge) -> Endpoint:
        expanded, secrets = call_settings(judge, os.environ)
        if expanded.api_key_env:
            key = os.environ.get(expanded.api_key_env, "")
            if not key:
                raise PermanentJudgeError(
                    f"environment variable {expanded.api_key_env} (api_key_env of judge "
                    f"{judge.name}) is not set on this worker",
                    kind="missing_key",
                )
        else:
            key = os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_KEY
        model = expanded.model.removeprefix("openai/")
        base = (expanded.api_base or OPENAI_BASE).rstrip("/")
        return cls(base, key, model, (key, *secrets))


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
        self.client = client or httpx.Client(timeout=TIMEOUT_S)

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.endpoint.key}"}
        url = f"{self.endpoint.base}{path}"
        try:
            response = self.client.request(method, url, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            message = redact(f"{type(exc).__name__}: {exc}", self.endpoint.secrets)
            raise TransientJudgeError(message, kind="connection") from None
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
        try:
            with self.client.stream("GET", url, headers=headers) as response:
                if response.status_code >= 400:
                    raise TransientJudgeError(
                        f"GET file {file_id}: {response.status_code}", kind="server_error"
                    )
                for text in response.iter_lines():
                    if text.strip():
                        yield json.loads(text)
        except httpx.HTTPError as exc:
            message = redact(f"{type(exc).__name__}: {exc}", self.endpoint.secrets)
            raise TransientJudgeError(message, kind="connection") from None

    def close(self) -> None:
        self.client.close()
