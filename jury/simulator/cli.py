"""`python -m simulator [options]`: what `jury simulate` execs."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jury.errors import ctrl_c_ends_quietly
from jury.simulator.config import parse_config
from jury.simulator.server import run


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_config(argv)
    try:
        run(config)
    except OSError as exc:
        # Typically the port is taken; say so plainly instead of with a traceback.
        print(f"simulator: cannot listen on {config.host}:{config.port}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:  # stopped: a Ctrl-C while Python exits ends it without a traceback
        ctrl_c_ends_quietly()
    return 0
