"""Calibration files on disk: written by `jury agreement --save-calibration`, named by a
later batch (`calibration: calib.json`, relative to the batch file) and read into its stored
config when the batch is loaded, so its records can be calibrated long after the file moved.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from jury.errors import BatchFileError, JuryError
from jury.schemas.batch import BatchConfig
from jury.schemas.calibration import Calibration


def _problems(calibration: Calibration, config: BatchConfig) -> list[str]:
    """Where the file does not fit the batch: a scale that differs, nothing in common."""
    problems = []
    judges = {j.name for j in config.panel}
    usable = False
    for name, fitted in calibration.dimensions.items():
        try:
            scale = config.dimension(name).resolved_scale
        except KeyError:
            continue
        if (fitted.low, fitted.high) != (scale.min, scale.max):
            problems.append(
                f"calibration: it was fitted to {name!r} on the scale {fitted.low:g}.."
                f"{fitted.high:g}, this batch scores it on {scale.min:g}..{scale.max:g}"
            )
        usable = usable or bool(judges & set(fitted.judges))
    if not usable and not problems:
        fitted_judges = sorted({j for d in calibration.dimensions.values() for j in d.judges})
        problems.append(
            f"calibration: the file fits judges {fitted_judges} on dimensions "
            f"{sorted(calibration.dimensions)}; none of them is on this batch's panel with one "
            "of its dimensions"
        )
    return problems


def read_calibration_file(batch_path: Path, config: BatchConfig) -> BatchConfig:
    """The config with its `calibration:` path replaced by the file's validated content."""
    if not isinstance(config.calibration, str):
        return config
    path = (batch_path.parent / config.calibration).resolve()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        calibration = Calibration.model_validate(data)
    except FileNotFoundError:
        problem = f"calibration: {path} does not exist"
        raise BatchFileError(str(batch_path), [problem]) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problem = f"calibration: cannot read {path} as JSON: {exc}"
        raise BatchFileError(str(batch_path), [problem]) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        problem = f"calibration: {path} is not a jury calibration file ({where}: {first['msg']})"
        raise BatchFileError(str(batch_path), [problem]) from None
    problems = _problems(calibration, config)
    if problems:
        raise BatchFileError(str(batch_path), problems)
    return config.model_copy(update={"calibration": calibration})


def write_calibration_file(path: Path, calibration: Calibration) -> None:
    try:
        path.write_text(calibration.model_dump_json(indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise JuryError(f"cannot write the calibration to {path}: {exc.strerror or exc}") from None
