"""The report's trust sections in a headless chromium: a labelled batch shows whether the panel
helps (its headline sentence, effective judges, the error correlations) and each judge's
agreement with people with intervals; an unlabelled one says what labels would add."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from selenium.webdriver.common.by import By

from jury.cli.main import jury as cli
from jury.local.services import ManagedProcess
from jury.settings import Settings
from tests.browser import chromium_driver, console_errors
from tests.conftest import worker_env
from tests.integration.test_trust import labelled_items, submit

pytestmark = pytest.mark.integration
browser = pytest.fixture(scope="module")(chromium_driver)
PANEL = ["balanced:a", "lenient:b", "strict:c"]


def open_report(settings: Settings, batch_id: str, folder: Path, browser: Any) -> None:
    report = folder / f"{batch_id}.html"
    made = CliRunner().invoke(
        cli, ["report", batch_id, "--output", str(report)], env=worker_env(settings)
    )
    assert made.exit_code == 0, made.output
    browser.get(report.as_uri())


def test_trust_sections_in_a_browser(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess, browser: Any
) -> None:
    labelled = submit(
        tmp_path, sqlite_workers, simulator, "report-labelled", PANEL, labelled_items(3000, 30)
    )
    open_report(sqlite_workers, labelled, tmp_path, browser)
    help_section = browser.find_element(By.ID, "panel-help")
    assert help_section.is_displayed()
    headline = help_section.find_element(By.CSS_SELECTOR, "p.headline").text
    assert headline.startswith(("The panel agrees with people", "Its best judge"))
    row = help_section.find_element(By.CSS_SELECTOR, "#panel-table tbody tr").text
    assert row.startswith("relevance 30 30") and " of 3" in row
    matrix = help_section.find_element(By.CSS_SELECTOR, "table.matrix").text
    assert "openai/lenient:b" in matrix
    assert "errors against people's labels" in help_section.text

    people = browser.find_element(By.ID, "people")
    assert people.is_displayed()
    rows = people.find_elements(By.CSS_SELECTOR, "table.people tbody tr")
    assert [r.text.split()[0] for r in rows] == [*(f"openai/{p}" for p in PANEL), "panel"]
    assert all(" [" in r.text for r in rows), "every figure has its interval"
    assert len(people.find_elements(By.CSS_SELECTOR, "svg circle")) == 4
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert console_errors(browser) == []

    unlabelled_items = [{"id": i["id"], "output": i["output"]} for i in labelled_items(3000, 10)]
    plain = submit(tmp_path, sqlite_workers, simulator, "report-plain", PANEL, unlabelled_items)
    open_report(sqlite_workers, plain, tmp_path, browser)
    assert "Without people's labels" in browser.find_element(By.ID, "panel-help").text
    assert "errors against the panel consensus" in browser.find_element(By.ID, "panel-help").text
    assert (
        "No item of this batch carries people's labels"
        in browser.find_element(By.ID, "people").text
    )
    assert console_errors(browser) == []
