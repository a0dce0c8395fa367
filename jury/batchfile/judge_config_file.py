"""A judge config of its own, named by the batch: `judges: judge_config.json` (the multi-LLM
judge plan's file, loaded as-is). The file is JSON or YAML, read within the same limits as the
batch: a mapping with `judges` (and optionally the plan's top-level `temperature`,
`consensus_threshold`, `flag_low_consensus`, `report_uncertainty` and an `aggregation`), or
just a list of judges. Its settings fill in what the batch file does not say itself; the
stored configuration holds the judges as loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jury.batchfile.documents import parse_document, read_document
from jury.errors import BatchFileError
from jury.schemas.limits import InputLimits

# The plan's top-level keys a judge config may carry (BatchConfig maps them into place).
PLAN_KEYS = ("temperature", "consensus_threshold", "flag_low_consensus", "report_uncertainty")


def _read(batch_path: Path, name: str, limits: InputLimits) -> Any:
    path = (batch_path.parent / name).resolve()
    if not path.is_file():
        raise BatchFileError(str(batch_path), [f"judges: the judge config {path} does not exist"])
    try:
        return parse_document(path, read_document(path, limits, "judge config"), limits)
    except BatchFileError as exc:
        raise BatchFileError(str(batch_path), [f"judges: {p}" for p in exc.problems]) from None


def merge_judge_config(batch_path: Path, data: dict[str, Any], limits: InputLimits) -> None:
    """Replace a `judges:` path in the parsed batch by the judge config it names."""
    name = data.get("judges")
    if not isinstance(name, str):
        return
    loaded = _read(batch_path, name, limits)
    if isinstance(loaded, list):
        loaded = {"judges": loaded}
    if not isinstance(loaded, dict) or not isinstance(loaded.get("judges"), list):
        raise BatchFileError(
            str(batch_path),
            [f"judges: {name} must hold a list of judges, or a mapping with `judges:` (a list)"],
        )
    data["judges"] = loaded["judges"]
    for key in PLAN_KEYS:
        if key in loaded and key not in data:
            data[key] = loaded[key]
    aggregation = loaded.get("aggregation")
    if isinstance(aggregation, dict):
        own = data.get("aggregation")
        data["aggregation"] = {**aggregation, **own} if isinstance(own, dict) else aggregation
