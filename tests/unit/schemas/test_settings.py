"""Settings travel to worker processes through the environment and come back unchanged."""

from __future__ import annotations

from jury.settings import Settings


def test_to_env_round_trips_every_field() -> None:
    settings = Settings(
        broker_url="redis://h:1/2",
        database_url="sqlite:///x.db",
        queue="q",
        lanes=3,
        rate_horizon_s=2.5,
        rate_margin=0.03,
        worker_concurrency=7,
        max_attempts=2,
    )
    assert Settings.from_env(settings.to_env()) == settings
    assert settings.all_queues == ["q", "q.lane0", "q.lane1", "q.lane2"]
