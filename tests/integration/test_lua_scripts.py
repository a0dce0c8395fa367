"""No Lua script can hang Redis: each returns at once on degenerate arguments (no keys, no
arguments, zero, negative or unparseable counts). Run on a private Redis: a script that
never ends answers every client `BUSY`, and the shared one must never be the one to find out.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
import redis

from jury.broker.scripts import lua, script_names
from jury.local.services import start_embedded_redis

pytestmark = pytest.mark.integration

# Far beyond any script's honest run here, far below Redis' own busy threshold (5 s).
ANSWER_WITHIN_S = 3.0
KEY_COUNTS = (0, 1, 2, 3, 5, 9)
ARGUMENTS: tuple[list[str], ...] = (
    [],
    ["0"] * 10,
    ["-1"] * 10,
    ["-1000000"] * 10,
    ["x"] * 10,
    ["1", "", "0", "0", "0", "0", "0", "0", "0", "0"],
)


@pytest.fixture(scope="module")
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[redis.Redis]:
    server = start_embedded_redis(tmp_path_factory.mktemp("lua-redis"))
    client = redis.Redis.from_url(server.url, socket_timeout=ANSWER_WITHIN_S)
    yield client
    client.close()
    server.stop()


def test_every_script_is_in_the_package() -> None:
    names = script_names()
    assert {"take_messages", "budget_reserve", "rate_reserve", "release_parked"} <= set(names)
    assert all(lua(name).strip() for name in names)


@pytest.mark.parametrize("name", script_names())
def test_script_returns_at_once_on_degenerate_arguments(
    private_redis: redis.Redis, name: str
) -> None:
    script = private_redis.register_script(lua(name))
    for count, args in itertools.product(KEY_COUNTS, ARGUMENTS):
        keys = [f"lua-test:{name}:{i}" for i in range(count)]
        # Lists with members, as queues and waiting lines have: a loop over them must end too.
        for key in keys:
            private_redis.delete(key)
            private_redis.rpush(key, "member without a newline", "q\n{}")
        try:
            script(keys=keys, args=args)
        except redis.ResponseError:
            pass  # a refusal (wrong type, a bad number) is an answer; a hang is not
        except redis.TimeoutError:
            pytest.fail(f"{name}.lua with {count} keys and {args} did not return")
    assert private_redis.ping()


def test_taking_messages_with_no_queue_left_returns_nothing(private_redis: redis.Redis) -> None:
    """The race once seen at a worker's warm shutdown: the script called with its queues gone
    and a step of 0 (`for first = 3, #KEYS, 0` never ends in Lua 5.1)."""
    take = private_redis.register_script(lua("take_messages"))
    private_redis.rpush("lua-test:queue", '{"properties": {}}')
    assert take(keys=["u", "ui", "lua-test:queue"], args=[64, 1.0, 0]) == []
    assert take(keys=["u", "ui"], args=[64, 1.0, 1]) == []
    assert private_redis.llen("lua-test:queue") == 1  # nothing taken
