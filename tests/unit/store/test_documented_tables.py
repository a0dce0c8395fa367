"""The docs name the store's tables as the program creates them: a user's `DELETE FROM` a
table the docs name must find the table (docs/caching.md once named jury_result_cache)."""

from __future__ import annotations

import re

from jury.store.models import Base
from tests.conftest import ROOT

# A SQL table named in the docs: `jury_…` right after FROM/INTO/TABLE/UPDATE, or in backticks
# on its own (`jury_samples`). jury_openai is the name of a LiteLLM provider, not a table.
TABLE = re.compile(r"(?:(?:FROM|INTO|TABLE|UPDATE)\s+|`)(jury_[a-z_]+)\b")
NOT_TABLES = {"jury_openai"}
# The monitoring page names Prometheus metrics (`jury_calls_total`), never tables; its names
# are checked against what jury serves by tests/integration/test_monitoring_files.py.
METRICS_PAGE = "docs/monitoring.md"


def test_every_table_the_docs_name_exists() -> None:
    tables = set(Base.metadata.tables)
    named: dict[str, set[str]] = {}
    for page in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        if page.relative_to(ROOT).as_posix() == METRICS_PAGE:
            continue
        for name in TABLE.findall(page.read_text()):
            if name not in NOT_TABLES:
                named.setdefault(name, set()).add(page.relative_to(ROOT).as_posix())
    assert "jury_answer_cache" in named  # the check reads the docs at all
    unknown = {name: sorted(pages) for name, pages in named.items() if name not in tables}
    assert unknown == {}, f"the docs name tables that do not exist: {unknown}"
