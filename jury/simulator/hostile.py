"""A hostile provider, for tests: answers that trickle in a byte at a time, bodies of garbage
bytes or invalid UTF-8, answers of megabytes, usage that is negative, missing, fractional or
absurd, and reasoning full of terminal markup and escape sequences.

Chosen per model with `--hostile MODEL=KIND` (MODEL: a full model name or a persona, as for
`--down`), so one simulator serves well-behaved and hostile judges side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import random
import zlib
from collections.abc import Mapping
from typing import Any

from aiohttp import web

HOSTILE_KINDS: tuple[str, ...] = (
    "trickle",  # the answer is sent one byte at a time, `trickle_ms` apart
    "garbage-bytes",  # 200 with a body of random bytes
    "invalid-utf8",  # a JSON body whose answer text holds bytes that are not UTF-8
    "huge-answer",  # an answer of `huge_answer_chars` characters
    "negative-usage",  # usage with negative token counts
    "missing-usage",  # no usage at all
    "fractional-usage",  # usage with fractional token counts
    "absurd-usage",  # usage of a quadrillion tokens
    "markup-reasoning",  # reasoning with terminal markup, escape sequences, HTML and bidi
    "garbled-vote",  # asked for a pass vote, answers one that is neither pass nor fail
    "gzip-bomb",  # 200 with a gzip body of ~200 KiB that inflates to GZIP_BOMB_BYTES
)
# What a `gzip-bomb` body inflates to: through an unbounded client, a worker's memory.
GZIP_BOMB_BYTES = 200 * 1024 * 1024
# Rich markup, an unclosed tag, ANSI clear-screen and window-title sequences, a bell, HTML,
# a right-to-left override and a fake newline record: all must reach a user as plain text.
HOSTILE_REASONING = (
    "[bold red]PWNED[/] [link=http://evil.invalid]click[/link] [/] [/nosuch] "
    "\x1b[2J\x1b[H\x1b]0;owned-window\x07 <script>alert('x')</script> <b>bold</b> "
    "\u202eevil-reversed\u202c \r\nScore: 1 \x08\x08\x00"
)
_INVALID_UTF8 = b"\xff\xfe\xc3\x28 not text \xed\xa0\x80"
_MARK = "@@JURY-INVALID-UTF8@@"


def hostile_options(persona: str = "balanced") -> list[str]:
    """Simulator options that make the model `PERSONA@KIND` misbehave as KIND, for every
    kind: one simulator then plays every hostile provider at once."""
    return [arg for kind in HOSTILE_KINDS for arg in ("--hostile", f"{persona}@{kind}={kind}")]


def parse_hostile(text: str) -> tuple[str, str]:
    """`MODEL=KIND` as (model, kind); ValueError naming the kinds otherwise."""
    model, sep, kind = text.rpartition("=")
    if not sep or not model or kind not in HOSTILE_KINDS:
        raise ValueError(f"expected MODEL=KIND with KIND one of {', '.join(HOSTILE_KINDS)}")
    return model, kind


def hostile_usage(kinds: frozenset[str], usage: Mapping[str, Any]) -> dict[str, Any] | None:
    """The usage block to send (None: send none)."""
    if "missing-usage" in kinds:
        return None
    changed = dict(usage)
    if "negative-usage" in kinds:
        changed.update(prompt_tokens=-1000, completion_tokens=-250, total_tokens=-1250)
    elif "fractional-usage" in kinds:
        changed.update(prompt_tokens=10.5, completion_tokens=2.25, total_tokens=12.75)
    elif "absurd-usage" in kinds:
        changed.update(prompt_tokens=10**15, completion_tokens=10**15, total_tokens=2 * 10**15)
    return changed


def huge_answer(score: float | int, chars: int) -> str:
    """A JSON answer whose reasoning alone holds `chars` characters."""
    return json.dumps({"score": score, "reasoning": "very long " * (chars // 10 + 1)})


def hostile_body(kinds: frozenset[str], payload: dict[str, Any], rng: random.Random) -> bytes:
    """The response body: the payload as JSON, unless a kind spoils its bytes."""
    if "garbage-bytes" in kinds:
        return rng.randbytes(512)
    if "invalid-utf8" in kinds:
        payload["choices"][0]["message"]["content"] = f'{{"score": 3, "reasoning": "{_MARK}"}}'
        return json.dumps(payload).encode().replace(_MARK.encode(), _INVALID_UTF8)
    usage = hostile_usage(kinds, payload.get("usage") or {})
    if usage is None:
        payload.pop("usage", None)
    else:
        payload["usage"] = usage
    return json.dumps(payload).encode()


async def send_body(
    request: web.Request, body: bytes, trickle_ms: float | None
) -> web.StreamResponse:
    """A 200 with `body`; with `trickle_ms`, one byte at a time, each `trickle_ms` apart
    (headers, with the full length, go first): every read gets a byte well within any read
    timeout, yet the answer takes len(body) × trickle_ms to arrive."""
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    if trickle_ms is None:
        return web.Response(body=body, headers=headers)
    response = web.StreamResponse(headers=headers)
    await response.prepare(request)
    with contextlib.suppress(ConnectionError):  # the client gave up: what we wanted
        for index in range(len(body)):
            await response.write(body[index : index + 1])
            await asyncio.sleep(trickle_ms / 1000)
        await response.write_eof()
    return response


@functools.cache
def gzip_bomb(inflated: int = GZIP_BOMB_BYTES) -> bytes:
    """A gzip body of zeros that inflates to `inflated` bytes (about 1,000 times its size),
    compressed once per process (about a second)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    parts = [packer.compress(block) for _ in range(inflated // len(block))]
    return b"".join([*parts, packer.compress(bytes(inflated % len(block))), packer.flush()])


def gzip_bomb_response() -> web.Response:
    """A 200 that says it is gzip'd JSON: a client that inflates it whole holds it whole."""
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    return web.Response(body=gzip_bomb(), headers=headers)
