"""The simulator answers the same requests with the same draws whatever order they arrive in
(same seed, same demo verdicts), and its --help names how it is run."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from jury.schemas.batch import Dimension, Item
from jury.simulator.config import build_parser, parse_config
from jury.simulator.draws import Draws, request_key
from jury.simulator.server import create_app
from jury.worker.judging.prompts import build_messages

RELEVANCE = Dimension.model_validate("relevance")
# Four cells, each asked three times (a judge's three samples): identical requests.
PROMPTS = [
    build_messages(Item(id=f"q{i}", input="Reset?", output=f"Answer {i}: use the link."), RELEVANCE)
    for i in range(4)
]


def test_the_help_names_how_the_simulator_is_run() -> None:
    usage = build_parser().format_usage()
    assert usage.startswith("usage: jury simulate "), usage
    assert "python -m jury.simulator" in build_parser().format_help()


def test_a_request_s_draws_do_not_depend_on_what_came_between() -> None:
    a, b = request_key("m", "prompt one", 0.8), request_key("m", "prompt two", 0.8)
    assert a != b != request_key("m", "prompt one", 0.7)
    first, second = Draws(3, "score"), Draws(3, "score")
    drawn = [first.next(a).random(), first.next(b).random(), first.next(a).random()]
    # The other order: b, then a twice. a's first and second draws are the same ones.
    other = [second.next(b).random(), second.next(a).random(), second.next(a).random()]
    assert (drawn[0], drawn[2], drawn[1]) == (other[1], other[2], other[0])
    assert drawn[0] != drawn[2]  # a repeated request is a new draw (another sample)
    assert Draws(4, "score").next(a).random() != drawn[0]  # another seed, other draws


def test_forgetting_the_oldest_request_keeps_memory_bounded() -> None:
    draws = Draws(0, "score", remembered=2)
    keys = [request_key("m", str(i), 1.0) for i in range(3)]
    first = draws.next(keys[0]).random()
    draws.next(keys[1])
    draws.next(keys[2])  # keys[0] is forgotten: its next answer starts over
    assert len(draws._answered) == 2
    assert draws.next(keys[0]).random() == first


async def _scores(order: list[int], concurrently: bool) -> dict[int, list[str]]:
    config = parse_config(["--seed", "21", "--formats", "json"])
    async with TestClient(TestServer(create_app(config))) as client:

        async def ask(index: int) -> tuple[int, str]:
            body: dict[str, Any] = {
                "model": "noisy",
                "messages": PROMPTS[index],
                "temperature": 1.0,
            }
            response = await client.post("/v1/chat/completions", json=body)
            assert response.status == 200
            answer = await response.json()
            return index, str(answer["choices"][0]["message"]["content"])

        if concurrently:
            answers = await asyncio.gather(*(ask(i) for i in order))
        else:
            answers = [await ask(i) for i in order]
    found: dict[int, list[str]] = {}
    for index, content in answers:
        found.setdefault(index, []).append(content)
    return found


def test_the_same_seed_answers_a_batch_alike_in_any_arrival_order() -> None:
    order = [i for i in range(len(PROMPTS)) for _ in range(3)]
    shuffled = order[:]
    random.Random(7).shuffle(shuffled)
    one = asyncio.run(_scores(order, concurrently=False))
    other = asyncio.run(_scores(shuffled, concurrently=True))
    assert {i: Counter(a) for i, a in one.items()} == {i: Counter(a) for i, a in other.items()}
    # The noisy judge's three samples of a cell are three draws, not one answer thrice.
    assert any(len(set(answers)) > 1 for answers in one.values())
