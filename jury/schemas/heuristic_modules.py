"""The modules a callable heuristic may never come from, whatever the operator allows
(Settings.heuristic_callables), and the rule for a module being under a prefix. Pure data,
read by the settings and by the heuristics' checks alike (docs/limits-and-security.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence

# Modules no callable heuristic may come from, whatever the operator allows: the process,
# the files, the interpreter and the network are theirs. A prefix of these in the setting is
# a configuration error (Settings.heuristic_callables).
REFUSED_MODULES = (
    "builtins",
    "os",
    "posix",
    "nt",
    "sys",
    "subprocess",
    "shutil",
    "importlib",
    "runpy",
    "pickle",
    "marshal",
    "ctypes",
    "code",
    "codeop",
    "pty",
    "socket",
    "signal",
    "multiprocessing",
    "threading",
    "_thread",
    "io",
    "pathlib",
    "tempfile",
    "webbrowser",
    "http",
    "urllib",
    "asyncio",
    "gc",
    "inspect",
    "jury",
)


def module_under(module: str, prefixes: Sequence[str]) -> bool:
    """True if `module` is one of `prefixes` or inside one (`a.b` is under `a`, `ab` is not)."""
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def refused_module(module: str) -> bool:
    """True for a module no callable heuristic may come from (REFUSED_MODULES, or private)."""
    return module_under(module, REFUSED_MODULES) or module.startswith("_")


# A module path as a setting may name it: `package.module`.
MODULE_PREFIX = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
