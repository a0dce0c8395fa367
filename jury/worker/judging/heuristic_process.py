"""`python -m jury.worker.judging.heuristic_process MEMORY_MIB [PREFIX…]`: a process that
measures heuristic samples for a worker (jury.worker.judging.heuristic_pool), so that a pattern
or a function that runs on is stopped by killing this process, not waited for by the worker.

The worker writes requests on standard input, each a 4-byte big-endian length and a pickled
MeasureRequest (the worker is the only writer: its own objects); this process answers each
with one line of JSON on the standard output it started with. What a callable prints goes
to standard error, never into that line. Belt and braces for a worker killed before it can
kill this process: each request's CPU time is bounded (RLIMIT_CPU: SIGXCPU ends the process
at the request's timeout plus a second), and a thread ends the process once its parent is
gone. The address space is bounded too (RLIMIT_AS).
"""

from __future__ import annotations

import json
import math
import os
import pickle
import resource
import struct
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

from jury.schemas.batch import Dimension, Item, Judge
from jury.schemas.heuristics import HeuristicError
from jury.worker.judging.heuristic_scores import measured_texts

READY = b'{"ready": true}\n'
HEADER = struct.Struct(">I")


@dataclass(frozen=True)
class MeasureRequest:
    judge: Judge
    item: Item
    dimensions: list[Dimension]
    texts: list[str]  # the output, or a pair's output_a and output_b
    timeout_s: float


def measure_request(request: MeasureRequest, allowed: list[str]) -> dict[str, Any]:
    """The reply to one request: per dimension, each text's [score, why], or the error."""
    results: list[dict[str, Any]] = []
    for dimension in request.dimensions:
        try:
            scores = measured_texts(request.judge, request.item, dimension, request.texts, allowed)
            results.append({"scores": [[score, why] for score, why in scores]})
        except HeuristicError as exc:
            results.append({"error": str(exc)[:2000], "kind": exc.kind})
    return {"results": results}


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    return data if data is not None and len(data) == size else None


def _bound_cpu(timeout_s: float) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(used + timeout_s) + 1
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _end_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def serve(requests: BinaryIO, replies: BinaryIO, allowed: list[str]) -> None:
    replies.write(READY)
    replies.flush()
    while (header := _read_exactly(requests, HEADER.size)) is not None:
        body = _read_exactly(requests, HEADER.unpack(header)[0])
        if body is None:
            return
        request: MeasureRequest = pickle.loads(body)  # from our own worker only
        _bound_cpu(request.timeout_s)
        try:
            reply = measure_request(request, allowed)
        except Exception as exc:  # ours: the worker fails the sample with it
            reply = {"failed": f"{type(exc).__name__}: {exc}"[:2000]}
        replies.write(json.dumps(reply, allow_nan=False).encode() + b"\n")
        replies.flush()


def main(argv: list[str]) -> None:
    memory = int(argv[0]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    threading.Thread(target=_end_with_parent, args=(os.getppid(),), daemon=True).start()
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a callable's print() goes to standard error, not into a reply
    sys.stdout = sys.stderr
    serve(sys.stdin.buffer, replies, argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
