"""jury: score large batches of LLM outputs with a distributed panel of LLM judges.

The Python API (`jury.submit`, `jury.attach`, `jury.evaluate`, …; see jury.api) is imported
on first use, so that `import jury` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jury._version import __version__

if TYPE_CHECKING:
    from jury.api import Batch, Results, attach, evaluate, submit
    from jury.errors import JuryError
    from jury.schemas.batch import Item
    from jury.schemas.results import Verdict
    from jury.schemas.status import BatchStatus

__all__ = [
    "Batch",
    "BatchStatus",
    "Item",
    "JuryError",
    "Results",
    "Verdict",
    "__version__",
    "attach",
    "evaluate",
    "submit",
]

# Public name -> the module that defines it, imported when the name is first used.
_LAZY = {
    "Batch": "jury.api",
    "Results": "jury.api",
    "attach": "jury.api",
    "evaluate": "jury.api",
    "submit": "jury.api",
    "Item": "jury.schemas.batch",
    "JuryError": "jury.errors",
    "Verdict": "jury.schemas.results",
    "BatchStatus": "jury.schemas.status",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jury' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
