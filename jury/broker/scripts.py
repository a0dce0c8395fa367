"""jury's Lua scripts, kept as .lua files beside this module (as dramatiq keeps its own) and
read once per process.

Every script's loops are bounded whatever its arguments: an empty key list, a count of zero
or less, or a key that grows while it runs. Redis runs one script at a time and answers
every other client `BUSY` meanwhile, so a script that never ends stops the whole cluster
(tests/integration/test_lua_scripts.py runs each with degenerate arguments).
"""

from __future__ import annotations

import functools
from importlib import resources


@functools.cache
def lua(name: str) -> str:
    """The text of `name`.lua."""
    return resources.files("jury.broker").joinpath("lua", f"{name}.lua").read_text()


def script_names() -> list[str]:
    return sorted(
        p.name.removesuffix(".lua")
        for p in resources.files("jury.broker").joinpath("lua").iterdir()
        if p.name.endswith(".lua")
    )
