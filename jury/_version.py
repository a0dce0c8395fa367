"""The one place jury's version is written (pyproject.toml reads it from here), and what a bug
report needs to say about the software that ran."""

from __future__ import annotations

import platform
from importlib import metadata

__version__ = "0.2.0"

# The libraries whose versions decide how jury behaves.
_DEPENDENCIES = ("celery", "kombu", "redis", "litellm", "sqlalchemy", "pydantic")


def runtime_versions() -> dict[str, str]:
    """jury's version, Python's, and those of the main dependencies, as installed."""
    versions = {"jury": __version__, "python": platform.python_version()}
    for name in _DEPENDENCIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def version_line() -> str:
    """`jury 0.2.0 (python 3.11.7, celery 5.7.0, …)`: one line for logs and `--version`."""
    versions = runtime_versions()
    rest = ", ".join(f"{name} {version}" for name, version in versions.items() if name != "jury")
    return f"jury {versions['jury']} ({rest})"
