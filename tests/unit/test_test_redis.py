"""Where the tests' Redis is (tests/conftest.py): JURY_TEST_REDIS_URL with host, port and
database, JURY_TEST_REDIS_DB still moving the database, each pytest-xdist worker on the next."""

from __future__ import annotations

import pytest

from tests.conftest import shared_redis_url


@pytest.mark.parametrize(
    ("environ", "xdist_index", "url"),
    [
        ({}, 0, "redis://127.0.0.1:6379/11"),
        ({}, 2, "redis://127.0.0.1:6379/13"),
        ({"JURY_TEST_REDIS_DB": "5"}, 1, "redis://127.0.0.1:6379/6"),
        ({"JURY_TEST_REDIS_URL": "redis://cache-box:6380/3"}, 0, "redis://cache-box:6380/3"),
        ({"JURY_TEST_REDIS_URL": "redis://cache-box:6380/3"}, 2, "redis://cache-box:6380/5"),
        # A URL without a database takes JURY_TEST_REDIS_DB's (or 11).
        (
            {"JURY_TEST_REDIS_URL": "redis://:pw@cache-box:6380", "JURY_TEST_REDIS_DB": "7"},
            1,
            "redis://:pw@cache-box:6380/8",
        ),
        ({"JURY_TEST_REDIS_URL": "rediss://cache-box/"}, 0, "rediss://cache-box/11"),
    ],
)
def test_the_test_redis_url(environ: dict[str, str], xdist_index: int, url: str) -> None:
    assert shared_redis_url(environ, xdist_index) == url


@pytest.mark.parametrize(
    "bad", ["http://cache-box:6380/1", "redis://cache-box/x", "redis://cache-box/1?db=2"]
)
def test_a_test_redis_url_that_is_not_one_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="JURY_TEST_REDIS_URL"):
        shared_redis_url({"JURY_TEST_REDIS_URL": bad})
