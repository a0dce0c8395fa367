"""`jury status`'s line on the workers' windows, from what their heartbeats publish."""

from __future__ import annotations

import json

from jury.broker.census import WorkerWindow
from jury.cli.batches import windows_line


def test_the_status_line_names_each_window_and_the_calls_in_flight() -> None:
    one = [WorkerWindow("a", 2048, 2001, 4096)]
    assert windows_line(one) == "workers: 1 alive, window 2,048 of 4,096, 2,001 tasks in flight"
    two = [*one, WorkerWindow("b", 1536, 1400, 4096)]
    assert windows_line(two) == (
        "workers: 2 alive, windows 2,048 and 1,536 of 4,096, 3,401 tasks in flight"
    )
    assert windows_line(None) is None and windows_line([]) is None
    assert json.dumps(vars(one[0])) == (
        '{"worker": "a", "window": 2048, "in_flight": 2001, "ceiling": 4096}'
    )
