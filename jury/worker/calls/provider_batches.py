"""Judges through the providers' Batch APIs (docs/batch-api.md): submitting and polling.

Every worker runs this in a thread of its own (jury.worker.engine.housekeeping), once a second:

- **submit**: under a cluster-wide Redis lock, first finish any intent a dead submitter left
  (a provider batch row still `submitting`: the provider's batch is looked up by our id in its
  metadata, and sent only if the provider has none), then group each judge's pending requests
  (once `batch_max_requests` are waiting, or none came for the collection window), claim them
  into a new provider batch row in one transaction, upload the JSONL, create the batch and store
  the provider's id;
- **poll**: each open provider batch whose next poll is due, one poller at a time (a Redis lock
  per batch; the next poll time is in SQL, so polls are spaced cluster-wide, further apart as
  the batch ages). When the provider ends it, its output and error files are read, each task's
  lines become its samples through the live path's own parsing (jury.worker.judging.judge_calls),
  and are
  stored under their unique keys with the chord's barrier
  (jury.worker.judging.pipeline.store_writes);
  a request the provider failed with a transient error goes to the next provider batch (or, with
  `batch_fallback_live`, to a live call) until the retry policy's attempts are spent.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from jury.broker import keys as redis_keys
from jury.errors import JudgeCallError, PermanentJudgeError
from jury.schemas.batch import BatchConfig, Judge
from jury.schemas.calls import CallSpec, call_spec
from jury.schemas.item_dimensions import item_dimension_names
from jury.schemas.placeholders import call_settings
from jury.schemas.provider_batches import ENDED, OPEN, PROVIDER_FINAL, SUBMITTING
from jury.schemas.results import CellSample
from jury.schemas.tasks import SampleRef
from jury.settings import judge_lanes
from jury.store import provider_batches as store
from jury.store.cache import CacheEntry
from jury.store.samples import SampleWrite
from jury.worker.calls.batch_client import BatchClient, Endpoint, endpoint_address, request_line
from jury.worker.calls.batch_lines import (
    BatchReply,
    Recorded,
    ended_without,
    read_line,
    token_prices,
)
from jury.worker.judging.judge_calls import RetryPolicy, asking_judge, judge_call
from jury.worker.judging.pipeline import _Write, store_writes
from jury.worker.judging.prompt_templates import asking_of
from jury.worker.judging.result_cache import cache_key
from jury.worker.limits.budget import estimate_cost
from jury.worker.runtime import WorkerRuntime

log = logging.getLogger("jury.batch_api")

# The longest poll interval (an old provider batch is polled every minute). The step, the
# collection window, the shortest poll interval and the locks' length are Settings
# (batch_api_*_s).
POLL_MAX_S = 60.0
# Stored in one transaction at a time.
STORE_CHUNK = 500
# A provider batch's reservation outlives its judge's batch_max_wait_s by this much.
BUDGET_LEASE_MARGIN_S = 3600.0
# Error kinds another attempt would not change.
PERMANENT_KINDS = frozenset(
    {"bad_request", "auth", "not_found", "missing_key", "missing_env", "egress_refused", "internal"}
)


class ProviderBatches:
    """The submitter and poller of one worker process."""

    def __init__(self, runtime: WorkerRuntime, node: str) -> None:
        self.runtime = runtime
        # What a lock of ours holds: the host and process (a test kills the holder by it).
        self.node = f"{node}:{os.getpid()}"
        self.clients: dict[Endpoint, BatchClient] = {}

    # -- locks ---------------------------------------------------------------------------
    def _lock(self, name: str) -> bool:
        key = self.runtime.redis.key(redis_keys.batch_api_lock(self.runtime.settings.queue, name))
        client = self.runtime.redis.client
        if client.set(
            key, self.node, nx=True, px=int(self.runtime.settings.batch_api_lock_s * 1000)
        ):
            return True
        held = client.get(key)
        if held in (self.node, self.node.encode()):
            client.pexpire(key, int(self.runtime.settings.batch_api_lock_s * 1000))
            return True
        return False

    def _unlock(self, name: str) -> None:
        key = self.runtime.redis.key(redis_keys.batch_api_lock(self.runtime.settings.queue, name))
        client = self.runtime.redis.client
        held = client.get(key)
        if held in (self.node, self.node.encode()):
            client.delete(key)

    def _client(self, judge: Judge) -> BatchClient:
        endpoint = Endpoint.of(judge, self.runtime.egress)
        if endpoint not in self.clients:
            self.clients[endpoint] = BatchClient(endpoint)
        return self.clients[endpoint]

    def step(self) -> bool:
        """One submit and one poll; whether either found work (its thread steps less often
        while none is found: jury.worker.engine.housekeeping)."""
        submitted = self.submit()
        polled = self.poll()
        return submitted or polled

    # -- submitting ----------------------------------------------------------------------
    def submit(self) -> bool:
        """Whether any request was pending or any intent unfinished."""
        sessions = self.runtime.sessions
        if not self._lock("submit"):
            return False
        try:
            unfinished = store.unfinished_batches(sessions, (SUBMITTING,))
            for intent in unfinished:
                self._send(intent, store.requests_of(sessions, intent.id), resumed=True)
            now = datetime.now(UTC)
            groups = store.pending_groups(sessions)
            for batch_id, judge_name, waiting, newest in groups:
                if self.runtime.state(batch_id).skips_work:
                    continue
                judge = self.runtime.config(batch_id).judge(judge_name)
                if (
                    waiting < judge.batch_max_requests
                    and (now - newest).total_seconds() < self.runtime.settings.batch_api_window_s
                ):
                    continue
                while claimed := store.claim_requests(
                    sessions, self._intent(batch_id, judge), judge.batch_max_requests
                ):
                    self._lock("submit")  # renewed: a dead submitter's lock runs out
                    self._send(*claimed, resumed=False)
            return bool(unfinished or groups)
        finally:
            self._unlock("submit")

    def _intent(self, batch_id: str, judge: Judge) -> dict[str, Any]:
        # Where, not with which key: a key the policy refuses fails the requests at the send.
        base, model = endpoint_address(judge)
        return {
            "id": f"jpb-{uuid.uuid4().hex}",
            "batch_id": batch_id,
            "judge": judge.name,
            "model": model,
            "api_base": base,
            "key_env": judge.api_key_env or "",
        }

    def _send(
        self, intent: store.ProviderBatch, requests: list[store.Request], resumed: bool
    ) -> None:
        sessions = self.runtime.sessions
        config = self.runtime.config(intent.batch_id)
        judge = config.judge(intent.judge)
        try:
            client = self._client(judge)
            found = client.find(intent.id) if resumed else None
            if found is None and not resumed and not self._reserve(intent, judge, requests):
                return
            if found is None:
                params = self._line_params(judge, [self._spec(config, r) for r in requests])
                lines = [
                    request_line(r.custom_id, client.endpoint, p, r.messages)
                    for r, p in zip(requests, params, strict=True)
                ]
                file_id = client.upload(f"{intent.id}.jsonl", ("\n".join(lines) + "\n").encode())
                found = client.create(file_id, intent.id)
        except PermanentJudgeError as exc:
            log.error("provider batch %s refused: %s", intent.id, exc)
            self._settle(intent, requests, {r.custom_id: exc for r in requests}, "failed")
            return
        except JudgeCallError as exc:
            log.warning("provider batch %s not submitted yet: %s", intent.id, exc)
            return
        poll_at = datetime.now(UTC) + timedelta(seconds=self.runtime.settings.batch_api_poll_s)
        store.set_batch(
            sessions,
            intent.id,
            state=OPEN,
            provider_id=str(found["id"]),
            provider_status=str(found.get("status") or ""),
            next_poll_at=poll_at,
        )
        log.info("provider batch %s: %d requests as %s", intent.id, len(requests), found["id"])

    def _reserve(
        self, intent: store.ProviderBatch, judge: Judge, requests: list[store.Request]
    ) -> bool:
        """Reserve what the provider batch may cost on its jury batch's budget, before the
        upload (jury.worker.limits.budget's estimate, request by request, held until the
        batch ends or its judge's batch_max_wait_s has passed). No room: its requests go back
        to pending, and with nothing else in flight the budget stops the batch."""
        runtime = self.runtime
        config = runtime.config(intent.batch_id)
        if runtime.out_of_budget(intent.batch_id, config) is None and runtime.uncapped(
            intent.batch_id, config
        ):
            return True
        estimate = sum(estimate_cost(judge, r.messages, runtime.prices) for r in requests)
        lease = judge.batch_max_wait_s + BUDGET_LEASE_MARGIN_S
        reservation = runtime.budget.reserve(
            intent.batch_id, intent.id, estimate, config.max_cost_usd, lease
        )
        if reservation.granted:
            return True
        store.send_back(runtime.sessions, intent.id, [r.id for r in requests])
        store.finish_batch(runtime.sessions, intent.id, 0, 0)
        if reservation.reading.reserved_usd <= 0:
            runtime.stop_for_budget(intent.batch_id, reservation.reading)
        log.info("provider batch %s: no room on the budget; its requests wait", intent.id)
        return False

    def _spec(self, config: BatchConfig, request: store.Request) -> CallSpec:
        """The request's task spec; its item is read only when items choose their criteria
        (a combined call scores the item's own dimensions)."""
        if not (config.mode == "combined" and config.per_item_dimensions):
            return call_spec(config, request.dimension)
        item = self.runtime.item(request.batch_id, request.item_id)
        return call_spec(config, request.dimension, item_dimension_names(config, item))

    @staticmethod
    def _line_params(judge: Judge, specs: list[CallSpec]) -> list[dict[str, Any]]:
        """What each request's line sends besides its messages: what a live call of the same
        task sends (a combined call's larger max_tokens, JSON mode), so it is the same call."""
        from jury.worker.calls.llm_client import sampling_params  # the worker has litellm loaded

        expanded, _ = call_settings(judge, os.environ)
        by_parts: dict[int, dict[str, Any]] = {}
        for spec in specs:
            parts = len(spec.dimensions)
            if parts not in by_parts:
                by_parts[parts] = sampling_params(asking_judge(expanded, parts))
        return [by_parts[len(spec.dimensions)] for spec in specs]

    # -- polling -------------------------------------------------------------------------
    def poll(self) -> bool:
        """Whether any provider batch was due a poll."""
        due = store.due_batches(self.runtime.sessions, datetime.now(UTC))
        for batch in due:
            if not self._lock(f"poll:{batch.id}"):
                continue
            try:
                self._poll_one(batch)
            except JudgeCallError as exc:
                log.warning("polling provider batch %s: %s; again later", batch.id, exc)
            finally:
                self._unlock(f"poll:{batch.id}")
        return bool(due)

    def _poll_one(self, batch: store.ProviderBatch) -> None:
        sessions = self.runtime.sessions
        now = datetime.now(UTC)
        age = (
            now - batch.created_at.replace(tzinfo=batch.created_at.tzinfo or UTC)
        ).total_seconds()
        interval = min(POLL_MAX_S, max(self.runtime.settings.batch_api_poll_s, age / 10))
        store.set_batch(sessions, batch.id, next_poll_at=now + timedelta(seconds=interval))
        judge = self.runtime.config(batch.batch_id).judge(batch.judge)
        client = self._client(judge)
        assert batch.provider_id is not None
        info = client.retrieve(batch.provider_id)
        status = str(info.get("status") or "")
        counts = info.get("request_counts") or {}
        progress = {
            "n_done": int(counts.get("completed") or 0),
            "n_failed": int(counts.get("failed") or 0),
        }
        if status not in PROVIDER_FINAL:
            store.set_batch(sessions, batch.id, provider_status=status, **progress)
            cancelled = self.runtime.state(batch.batch_id).skips_work
            if status != "cancelling" and (cancelled or age > judge.batch_max_wait_s):
                log.info("cancelling provider batch %s (%s)", batch.id, batch.provider_id)
                client.cancel(batch.provider_id)
            return
        store.set_batch(sessions, batch.id, state=ENDED, provider_status=status, **progress)
        requests = store.requests_of(sessions, batch.id)
        wanted = {r.custom_id: r for r in requests}
        prices = token_prices(judge)
        answers: dict[str, BatchReply | JudgeCallError] = {}
        for file_id in (info.get("output_file_id"), info.get("error_file_id")):
            for line in client.lines(file_id):
                request = wanted.get(str(line.get("custom_id")))
                if request is not None and request.custom_id not in answers:
                    answers[request.custom_id] = read_line(line, request.messages, prices)
        self._settle(batch, requests, answers, status)

    # -- storing -------------------------------------------------------------------------
    def _settle(
        self,
        batch: store.ProviderBatch,
        requests: list[store.Request],
        answers: dict[str, BatchReply | JudgeCallError],
        status: str,
    ) -> None:
        """Store each task's samples once, send failed requests on, mark the batch stored."""
        runtime, sessions = self.runtime, self.runtime.sessions
        config = runtime.config(batch.batch_id)
        judge = config.judge(batch.judge)
        if runtime.state(batch.batch_id).skips_work:
            store.finish_batch(sessions, batch.id, 0, 0)
            runtime.budget.settle(batch.batch_id, batch.id, 0.0)  # its reservation given back
            return  # a cancelled batch: its requests stay unanswered, as its queued tasks do
        tasks: dict[SampleRef, list[store.Request]] = {}
        for r in requests:
            ref = SampleRef(r.batch_id, r.item_id, r.dimension, r.judge, r.sample)
            tasks.setdefault(ref, []).append(r)
        outcomes = asyncio.run(self._samples(tasks, answers, status))
        writes: list[_Write] = []
        done: list[int] = []
        again: list[int] = []
        live: list[SampleRef] = []
        n_ok = n_failed = 0
        for ref, samples in outcomes.items():
            ids = [r.id for r in tasks[ref]]
            attempts = max(r.attempts for r in tasks[ref]) + 1
            kinds = {s.result.error_kind for s in samples if not s.result.ok}
            retry = bool(kinds) and not kinds & PERMANENT_KINDS
            if retry and attempts < runtime.policy.max_attempts:
                if judge.batch_fallback_live:
                    live.append(ref)
                    done.extend(ids)
                else:
                    again.extend(ids)
                n_failed += len(ids)
                continue
            fixed = [
                s.model_copy(update={"result": s.result.model_copy(update={"attempts": attempts})})
                for s in samples
            ]
            cache = self._cache_entry(ref, tasks[ref], fixed) if not kinds else None
            writes.append(_Write(ref, SampleWrite(ref.batch_id, ref.item_id, fixed, cache), True))
            done.extend(ids)
            if kinds:
                n_failed += len(ids)
            else:
                n_ok += len(ids)
        for start in range(0, len(writes), STORE_CHUNK):
            store_writes(runtime, writes[start : start + STORE_CHUNK])
        if live:
            lanes = judge_lanes(
                runtime.settings.queue, runtime.settings.lanes, [j.name for j in config.panel]
            )
            for ref in live:
                runtime.queues.park(tuple(ref), lanes[ref.judge], {"live": True}, 0.0)
        store.mark_done(sessions, batch.id, done)
        store.send_back(sessions, batch.id, again)
        store.finish_batch(sessions, batch.id, n_ok, n_failed)
        # Its cost is on the meter (the writes' spend): the reservation is given back.
        runtime.budget.settle(batch.batch_id, batch.id, 0.0)
        log.info(
            "provider batch %s (%s): %d requests answered, %d failed, %d sent on, %d live",
            batch.id,
            status,
            n_ok,
            n_failed,
            len(again),
            len(live),
        )

    def _cache_entry(
        self, ref: SampleRef, requests: list[store.Request], samples: list[CellSample]
    ) -> CacheEntry | None:
        """The answer to keep in the result cache, under the key a live task would look up."""
        config = self.runtime.config(ref.batch_id)
        if not config.cache:
            return None
        judge = config.judge(ref.judge)
        item = self.runtime.item(ref.batch_id, ref.item_id)
        messages = [r.messages for r in sorted(requests, key=lambda r: r.call)]
        key = cache_key(judge, item, messages, ref.sample)
        return self.runtime.result_cache.entry(key, judge, samples)

    async def _samples(
        self,
        tasks: dict[SampleRef, list[store.Request]],
        answers: dict[str, BatchReply | JudgeCallError],
        status: str,
    ) -> dict[SampleRef, list[CellSample]]:
        """Each task's samples from its lines, parsed as a live call's answers are."""
        once = RetryPolicy(max_attempts=1)
        out: dict[SampleRef, list[CellSample]] = {}
        for ref, requests in tasks.items():
            config = self.runtime.config(ref.batch_id)
            item = self.runtime.item(ref.batch_id, ref.item_id)
            spec = call_spec(config, ref.dimension, item_dimension_names(config, item))
            dimensions = [config.dimension(name) for name in spec.dimensions]
            ordered = sorted(requests, key=lambda r: r.call)
            replies = [answers.get(r.custom_id) or ended_without(status) for r in ordered]
            out[ref] = await judge_call(
                config.judge(ref.judge),
                dimensions,
                spec.orders,
                [r.messages for r in ordered],
                ref.sample,
                Recorded(replies),
                once,
                asking=asking_of(config, config.judge(ref.judge)),
            )
        return out
