"""What a finished batch produced, read into memory: records, judgments, failing judges."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jury.errors import JuryError
from jury.results.csv_records import csv_columns, record_row
from jury.results.samples import SAMPLE_COLUMNS, sample_record
from jury.schemas.outcome import JudgeFailures
from jury.schemas.results import Verdict
from jury.schemas.status import BatchStatus
from jury.store.inspection import StoredSample

if TYPE_CHECKING:
    import pandas

PANDAS_MISSING = (
    "to_pandas() needs pandas, which jury installs only as an optional extra: "
    "pip install 'jury-panel[pandas]' (from a clone: pip install '.[pandas]'; or just pip "
    "install pandas) in this environment. Without it, the same data is in `results.records` "
    "(typed records) and `results.rows()` (plain dicts, one per record; "
    "`rows(samples=True)`, one per judgment)."
)


@dataclass
class Results:
    """What a batch produced, read into memory: its status, its result records (one per item
    and dimension), every judgment behind them, and a summary of each failing judge."""

    status: BatchStatus
    records: list[Verdict]
    samples: list[StoredSample]
    failures: list[JudgeFailures]
    judges: list[str]
    pairwise: bool = False
    methods: list[str] = field(default_factory=list)  # aggregation.also_across_models
    pass_vote: bool = False  # the batch's pass_vote: vote_share, passed_by_vote columns

    def rows(self, samples: bool = False) -> list[dict[str, Any]]:
        """One flat dict per record (the CSV columns of `jury results --format csv`), or with
        `samples`, one per judgment (those of `jury results --samples`)."""
        if samples:
            return [sample_record(s) for s in self.samples]
        columns = self._columns()
        return [
            dict(
                zip(
                    columns,
                    record_row(
                        r,
                        self.judges,
                        self.pairwise,
                        methods=self.methods,
                        pass_vote=self.pass_vote,
                    ),
                    strict=True,
                )
            )
            for r in self.records
        ]

    def to_pandas(self, samples: bool = False) -> pandas.DataFrame:
        """The records (or, with `samples`, the judgments) as a pandas DataFrame."""
        try:
            import pandas
        except ImportError:
            raise JuryError(PANDAS_MISSING) from None
        columns = SAMPLE_COLUMNS if samples else self._columns()
        frame = pandas.DataFrame(self.rows(samples), columns=columns)
        return frame.replace({"": None}) if not samples else frame

    def _columns(self) -> list[str]:
        return csv_columns(
            self.judges, self.pairwise, methods=self.methods, pass_vote=self.pass_vote
        )
