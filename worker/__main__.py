"""`python -m worker [celery worker options]`: what `jury worker` runs."""

from __future__ import annotations

import os
import sys

from schemas.errors import JuryError
from schemas.settings import Settings


def main(argv: list[str]) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        settings = Settings.from_env()
    except Exception as exc:
        print(f"jury worker: bad configuration: {exc}", file=sys.stderr)
        return 2
    from worker.app import create_worker_app

    app = create_worker_app(settings)
    # Load litellm before taking tasks, so the first judgments do not pay for the import.
    try:
        import worker.llm_client  # noqa: F401
    except JuryError as exc:
        print(f"jury worker: {exc}", file=sys.stderr)
        return 2
    defaults = [
        "worker",
        f"--pool={settings.worker_pool}",
        f"--concurrency={settings.worker_concurrency}",
        f"--queues={','.join(settings.all_queues)}",
        "--loglevel=INFO",
        "--without-gossip",
        "--without-mingle",
    ]
    app.worker_main(defaults + argv)  # options given later override the defaults
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
