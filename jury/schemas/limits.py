"""Limits on what jury reads from a user: each a setting with a default, read from the
environment when a command starts (never at import). docs/limits-and-security.md lists them.

The line limit of an items file is the batch's own `max_item_chars` (a line may hold 4 bytes
per character of it, plus 64 KiB of JSON around the text), so it is raised in the batch file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jury.errors import ConfigurationError

MIB = 1024 * 1024

_ENV_NAMES: dict[str, str] = {
    "max_document_bytes": "JURY_MAX_DOCUMENT_BYTES",
    "max_items_file_bytes": "JURY_MAX_ITEMS_FILE_BYTES",
    "max_nesting_depth": "JURY_MAX_NESTING_DEPTH",
    "max_yaml_alias_nodes": "JURY_MAX_YAML_ALIAS_NODES",
    "max_judges": "JURY_MAX_JUDGES",
    "max_dimensions": "JURY_MAX_DIMENSIONS",
    "max_batch_samples": "JURY_MAX_BATCH_SAMPLES",
}


class InputLimits(BaseModel):
    model_config = ConfigDict(frozen=True)

    # A file parsed whole: the batch file (YAML or JSON) and an items file that is one JSON
    # array. Parsing takes several times the file's size in memory.
    max_document_bytes: int = Field(default=64 * MIB, gt=0)
    # An items file read as a stream (JSON Lines, CSV, Parquet): only time grows with it.
    max_items_file_bytes: int = Field(default=64 * 1024 * MIB, gt=0)
    # Nesting of lists and mappings, in the batch file and in each item.
    max_nesting_depth: int = Field(default=32, ge=4, le=500)
    # Nodes that YAML aliases (`*name`, `<<: *name`) may repeat, in all: a few aliases that
    # refer to each other can otherwise stand for billions of nodes.
    max_yaml_alias_nodes: int = Field(default=10_000, ge=0)
    # Judges (and candidates) one batch file names: counted before any is validated, so a
    # panel of 100,000 costs nothing to refuse.
    max_judges: int = Field(default=1_000, ge=1)
    # Criteria one batch is judged on: its dimensions and those its items bring.
    max_dimensions: int = Field(default=1_000, ge=1)
    # Judge samples one batch asks for (cells × the panel's samples per cell), counted as the
    # items are read, before anything is planned or enqueued.
    max_batch_samples: int = Field(default=100_000_000, ge=1)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> InputLimits:
        env = os.environ if env is None else env
        values = {field: env[name] for field, name in _ENV_NAMES.items() if env.get(name)}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            names = ", ".join(_ENV_NAMES[str(e["loc"][0])] for e in exc.errors() if e["loc"])
            raise ConfigurationError(
                f"{names or 'a JURY_MAX_* variable'} must be a whole number in range "
                f"({exc.errors()[0]['msg']})"
            ) from None

    @staticmethod
    def env_name(field: str) -> str:
        """The variable that raises the limit `field`, for error messages."""
        return _ENV_NAMES[field]
