"""`jury agreement BATCH`: do the judges agree with people, and does the panel help?

Reads the batch's records once (with people's labels where items carry them) and prints the
trust report (schemas.trust): per dimension, each judge's and the panel's agreement with the
labels, with bootstrap intervals over items; the panel against its best single judge; the
correlation of the judges' errors and the effective number of judges. `--save-calibration`
also fits each judge's map to the labels (schemas.calibration_fit) and writes the file a later
batch may name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.text import Text

from jury.analysis.calibration import DEFAULT_FOLDS, fit_calibration
from jury.analysis.trust import trust_report
from jury.batchfile.calibration_file import write_calibration_file
from jury.errors import JuryError
from jury.results.formats import make_console
from jury.results.labelled import read_records
from jury.results.terminal import safe_text
from jury.results.trust_tables import calibration_table, print_trust
from jury.schemas.calibration import Calibration, FittedOn
from jury.schemas.trust_records import TrustRecords
from jury.stats.bootstrap import resamples_for
from jury.store.engine import session_factory
from jury.store.repository import batch_status, load_config


def _calibrate(
    records: TrustRecords,
    batch_id: str,
    batch_name: str,
    scales: dict[str, tuple[float, float]],
    folds: int,
    seed: int,
) -> Calibration:
    if not records.n_labelled:
        raise JuryError(
            f"batch {batch_id} has no labelled records: a calibration is fitted to people's "
            "labels (`labels: {dimension: score}` on its items)"
        )
    calibration = fit_calibration(
        records,
        scales,
        folds=folds,
        seed=seed,
        fitted_on=FittedOn(batch_id=batch_id, name=batch_name, n_labelled=records.n_labelled),
    )
    if not calibration.dimensions:
        raise JuryError(
            f"batch {batch_id}: no judge has labels on 10 items or more of one dimension, too "
            "few to fit and cross-validate a calibration"
        )
    return calibration


def run_agreement(
    batch_id: str,
    fmt: str,
    resamples: int | None,
    seed: int,
    save_calibration: Path | None,
    folds: int,
) -> None:
    from jury.cli.common import load_settings

    sessions = session_factory(load_settings().database_url)
    status = batch_status(sessions, batch_id)
    config = load_config(sessions, batch_id)
    if save_calibration is not None and config.pairwise is not None:
        raise JuryError(
            "--save-calibration: a pairwise batch's labels are preferred sides; calibration "
            "maps a judge's scores to people's scores"
        )
    records = TrustRecords()
    for verdict in read_records(sessions, batch_id, config):
        records.add(verdict)
    largest = max((len(d.labelled) for d in records.dimensions.values()), default=0)
    report = trust_report(
        records, resamples=resamples_for(largest) if resamples is None else resamples, seed=seed
    )
    calibration = None
    if save_calibration is not None:
        scales = {d.name: (d.resolved_scale.min, d.resolved_scale.max) for d in config.dimensions}
        calibration = _calibrate(records, batch_id, status.name, scales, folds, seed)
        write_calibration_file(save_calibration, calibration)
    if fmt == "json":
        document: dict[str, object] = {
            "batch_id": batch_id,
            "trust": report.model_dump(mode="json"),
        }
        if calibration is not None:
            document["calibration"] = calibration.model_dump(mode="json")
        click.echo(json.dumps(document))
        return
    console = make_console()
    console.print(
        Text.assemble(
            safe_text(status.name, "bold"), safe_text(f" ({batch_id}): {status.status.value}")
        ),
        highlight=False,
    )
    print_trust(console, report, matrices=True)
    if calibration is not None:
        console.print(calibration_table(calibration))
        console.print(f"wrote {save_calibration}", highlight=False)


@click.command()
@click.argument("batch_id")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--resamples",
    type=click.IntRange(0, 100_000),
    help="Bootstrap resamples for the intervals (default 400, fewer past 500 labelled items).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the resamples.")
@click.option(
    "--save-calibration",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Fit each judge's map to the labels and write it here, for `calibration:` in a batch.",
)
@click.option(
    "--folds",
    type=click.IntRange(2, 50),
    default=DEFAULT_FOLDS,
    show_default=True,
    help="Cross-validation folds for --save-calibration.",
)
def agreement(**options: Any) -> None:
    """Agreement of each judge and the panel with people's labels (items' `labels`, or a
    pair's `label`), whether the panel beats its best judge, the correlation of the judges'
    errors and the effective number of judges."""
    from jury.cli.common import user_errors

    user_errors(run_agreement)(**options)
