"""OpenAI's files and batches endpoints, simulated: upload a JSONL of chat completion requests,
create a batch of it, retrieve it, read its output and error files, cancel it, list batches.

Each line is answered by the simulator's own chat completions endpoint (over HTTP, so every
persona, fault and limit applies), plus `--batch-error-rate` per-line failures (a 500 in the
error file). A batch completes no sooner than `--batch-delay` seconds after it was created;
with `--batch-expire` it expires when unfinished by then. Files and batches are kept on disk
(`--batch-dir`), so a simulator killed mid-batch and started again on the same folder goes on
with it, as a provider's does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from jury.simulator.config import SimulatorConfig

UNFINISHED = ("validating", "in_progress", "finalizing", "cancelling")
LINE_CONCURRENCY = 64
TICK_S = 0.1


def _write(path: Path, data: bytes) -> None:
    partial = path.with_suffix(path.suffix + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


class BatchStore:
    """Files and batches on disk, and the task that runs the batches."""

    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        folder = config.batch_dir or tempfile.mkdtemp(prefix="jury-simulator-batches-")
        self.files = Path(folder) / "files"
        self.batches = Path(folder) / "batches"
        self.files.mkdir(parents=True, exist_ok=True)
        self.batches.mkdir(parents=True, exist_ok=True)
        self.self_url: str | None = None
        self.running: dict[str, asyncio.Task[None]] = {}
        self.lines_received = 0
        self.api_calls = 0  # requests to the files and batches endpoints
        self.marks = Path(folder)

    def first(self, what: str) -> bool:
        """True the first time `what` happens to this folder's batches (kept across restarts):
        only the first batch creation and the first file download are slowed."""
        mark = self.marks / f"{what}.done"
        if mark.exists():
            return False
        mark.touch()
        return True

    # -- storage ---------------------------------------------------------------------------
    def save_file(self, content: bytes, purpose: str, name: str) -> dict[str, Any]:
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        _write(self.files / file_id, content)
        meta = {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
        }
        _write(self.files / f"{file_id}.json", json.dumps(meta).encode())
        return meta

    def file_meta(self, file_id: str) -> dict[str, Any] | None:
        path = self.files / f"{Path(file_id).name}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def file_content(self, file_id: str) -> bytes | None:
        path = self.files / Path(file_id).name
        return path.read_bytes() if path.exists() and self.file_meta(file_id) else None

    def batch(self, batch_id: str) -> dict[str, Any] | None:
        path = self.batches / f"{Path(batch_id).name}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def put(self, batch: dict[str, Any]) -> None:
        _write(self.batches / f"{batch['id']}.json", json.dumps(batch).encode())

    def all_batches(self) -> list[dict[str, Any]]:
        found = [json.loads(p.read_text()) for p in self.batches.glob("*.json")]
        return sorted(found, key=lambda b: (b["created_at_precise"], b["id"]), reverse=True)

    # -- running ---------------------------------------------------------------------------
    async def run_forever(self) -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                await asyncio.sleep(TICK_S)
                for batch in self.all_batches():
                    if batch["status"] in UNFINISHED and batch["id"] not in self.running:
                        task = asyncio.create_task(self._run(session, batch["id"]))
                        self.running[batch["id"]] = task

    async def _run(self, session: aiohttp.ClientSession, batch_id: str) -> None:
        try:
            await self._advance(session, batch_id)
        finally:
            self.running.pop(batch_id, None)

    async def _advance(self, session: aiohttp.ClientSession, batch_id: str) -> None:
        batch = self.batch(batch_id)
        if batch is None or batch["status"] not in UNFINISHED:
            return
        if batch["status"] == "cancelling":
            batch.update(status="cancelled", cancelled_at=int(time.time()))
            self.put(batch)
            return
        if self._expired(batch):
            return
        if batch["status"] == "validating":
            batch.update(status="in_progress", in_progress_at=int(time.time()))
            self.put(batch)
        if self.self_url is None:
            return
        content = self.file_content(batch["input_file_id"]) or b""
        requests = [json.loads(line) for line in content.splitlines() if line.strip()]
        outputs, errors = await self._answer_all(session, batch_id, requests)
        # Done no sooner than the batch's delay; a cancel that came meanwhile wins.
        due = batch["created_at_precise"] + self.config.batch_delay_s
        while time.time() < due:
            await asyncio.sleep(min(TICK_S, max(0.0, due - time.time())))
            current = self.batch(batch_id)
            if current is None or current["status"] != "in_progress" or self._expired(current):
                return
        current = self.batch(batch_id)
        if current is None or current["status"] != "in_progress":
            return
        out = self.save_file(
            "".join(json.dumps(o) + "\n" for o in outputs).encode(),
            "batch_output",
            f"{batch_id}_output.jsonl",
        )
        err = None
        if errors:
            err = self.save_file(
                "".join(json.dumps(e) + "\n" for e in errors).encode(),
                "batch_output",
                f"{batch_id}_error.jsonl",
            )
        current.update(
            status="completed",
            completed_at=int(time.time()),
            output_file_id=out["id"],
            error_file_id=err["id"] if err else None,
            request_counts={
                "total": len(requests),
                "completed": len(outputs),
                "failed": len(errors),
            },
        )
        self.put(current)

    def _expired(self, batch: dict[str, Any]) -> bool:
        """Expire the batch if `--batch-expire` seconds have passed since it was created."""
        expire = self.config.batch_expire_s
        if not expire or time.time() <= batch["created_at_precise"] + expire:
            return False
        batch.update(status="expired", expired_at=int(time.time()))
        self.put(batch)
        return True

    async def _answer_all(
        self, session: aiohttp.ClientSession, batch_id: str, requests: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        gate = asyncio.Semaphore(LINE_CONCURRENCY)
        outputs: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []

        async def one(request: dict[str, Any]) -> None:
            custom_id = str(request.get("custom_id"))
            rng = random.Random(f"{self.config.seed}:{batch_id}:{custom_id}")
            line_id = f"batch_req_{uuid.uuid4().hex[:16]}"
            if rng.random() < self.config.batch_error_rate:
                body: Any = {
                    "error": {"message": "simulated batch line failure", "type": "server_error"}
                }
                status = 500
            else:
                async with gate:
                    status, body = await self._complete(session, request.get("body") or {})
            line = {
                "id": line_id,
                "custom_id": custom_id,
                "response": {"status_code": status, "request_id": line_id, "body": body},
                "error": None,
            }
            (outputs if status == 200 else errors).append(line)

        await asyncio.gather(*(one(r) for r in requests))
        return outputs, errors

    async def _complete(
        self, session: aiohttp.ClientSession, body: dict[str, Any]
    ) -> tuple[int, Any]:
        url = f"{self.self_url}/v1/chat/completions"
        try:
            async with session.post(
                url, json=body, timeout=aiohttp.ClientTimeout(total=120)
            ) as response:
                return response.status, await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as exc:
            return 500, {"error": {"message": f"{type(exc).__name__}", "type": "server_error"}}


BATCHES_KEY = web.AppKey("simulator_batches", BatchStore)


@web.middleware
async def count_api_calls(request: web.Request, handler: Any) -> web.StreamResponse:
    """Requests to the files and batches endpoints, for GET /stats (`batch_api`)."""
    if "/files" in request.path or "/batches" in request.path:
        request.app[BATCHES_KEY].api_calls += 1
    response: web.StreamResponse = await handler(request)
    return response


def batch_stats(store: BatchStore) -> dict[str, int]:
    return {"api_calls": store.api_calls, "lines": store.lines_received}


def _not_found(what: str) -> web.Response:
    body = {"error": {"message": f"No such {what}", "type": "invalid_request_error"}}
    return web.json_response(body, status=404)


async def upload_file(request: web.Request) -> web.Response:
    store = request.app[BATCHES_KEY]
    reader = await request.multipart()
    purpose, name, content = "", "upload.jsonl", b""
    while (part := await reader.next()) is not None:
        if not isinstance(part, aiohttp.BodyPartReader):
            continue
        if part.name == "purpose":
            purpose = (await part.read()).decode()
        elif part.name == "file":
            name = part.filename or name
            content = bytes(await part.read())
    return web.json_response(store.save_file(content, purpose, name))


async def get_file(request: web.Request) -> web.Response:
    meta = request.app[BATCHES_KEY].file_meta(request.match_info["file_id"])
    return web.json_response(meta) if meta else _not_found("file")


async def file_content(request: web.Request) -> web.Response:
    store = request.app[BATCHES_KEY]
    content = store.file_content(request.match_info["file_id"])
    if content is None:
        return _not_found("file")
    if store.config.batch_file_delay_s and store.first("file"):
        await asyncio.sleep(store.config.batch_file_delay_s)
    return web.Response(body=content, content_type="application/jsonl")


async def create_batch(request: web.Request) -> web.Response:
    store = request.app[BATCHES_KEY]
    body = await request.json()
    file_id = str(body.get("input_file_id") or "")
    content = store.file_content(file_id)
    if content is None:
        return _not_found("input file")
    now = time.time()
    lines = sum(1 for line in content.splitlines() if line.strip())
    store.lines_received += lines
    batch = {
        "id": f"batch_{uuid.uuid4().hex[:24]}",
        "object": "batch",
        "endpoint": body.get("endpoint"),
        "errors": None,
        "input_file_id": file_id,
        "completion_window": body.get("completion_window", "24h"),
        "status": "validating",
        "output_file_id": None,
        "error_file_id": None,
        "created_at": int(now),
        "created_at_precise": now,
        "request_counts": {"total": lines, "completed": 0, "failed": 0},
        "metadata": body.get("metadata") or {},
    }
    store.put(batch)
    if store.config.batch_create_delay_s and store.first("create"):
        await asyncio.sleep(store.config.batch_create_delay_s)
    return web.json_response(batch)


async def get_batch(request: web.Request) -> web.Response:
    batch = request.app[BATCHES_KEY].batch(request.match_info["batch_id"])
    return web.json_response(batch) if batch else _not_found("batch")


async def cancel_batch(request: web.Request) -> web.Response:
    store = request.app[BATCHES_KEY]
    batch = store.batch(request.match_info["batch_id"])
    if batch is None:
        return _not_found("batch")
    if batch["status"] in UNFINISHED:
        batch.update(status="cancelling", cancelling_at=int(time.time()))
        store.put(batch)
    return web.json_response(batch)


async def list_batches(request: web.Request) -> web.Response:
    found = request.app[BATCHES_KEY].all_batches()
    after = request.query.get("after")
    if after:
        ids = [b["id"] for b in found]
        found = found[ids.index(after) + 1 :] if after in ids else []
    limit = int(request.query.get("limit") or 20)
    page = found[:limit]
    return web.json_response(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(found) > limit,
        }
    )


def add_batch_routes(app: web.Application, config: SimulatorConfig) -> None:
    app[BATCHES_KEY] = BatchStore(config)
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/files", upload_file)
        app.router.add_get(f"{prefix}/files/{{file_id}}", get_file)
        app.router.add_get(f"{prefix}/files/{{file_id}}/content", file_content)
        app.router.add_post(f"{prefix}/batches", create_batch)
        app.router.add_get(f"{prefix}/batches", list_batches)
        app.router.add_get(f"{prefix}/batches/{{batch_id}}", get_batch)
        app.router.add_post(f"{prefix}/batches/{{batch_id}}/cancel", cancel_batch)

    async def runner(app: web.Application) -> Any:
        task = asyncio.create_task(app[BATCHES_KEY].run_forever())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(runner)
