"""A real headless browser for the tests: Debian's chromium driven through its chromedriver
by selenium (never a browser download). Where chromium is missing the browser tests skip,
except in CI (CI=true), where they fail: .ci/run installs it."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("JURY_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("JURY_TEST_CHROMEDRIVER", "/usr/bin/chromedriver"))
IN_CI = os.environ.get("CI", "").lower() == "true"
WINDOW = (1280, 900)


def chromium_driver() -> Iterator[Any]:
    """A headless chromium session that records the page's console messages."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        message = (
            f"no headless browser: {', '.join(missing)} missing "
            "(apt-get install chromium chromium-driver)"
        )
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # tests may run as root, where chromium's sandbox refuses to start
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        "--no-first-run",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def use_basic_auth(driver: Any, user: str, password: str) -> None:
    """Send the login with every request of the page (its XHRs included)."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}}
    )


def console_errors(driver: Any) -> list[str]:
    """Console messages at error level since the last call (reading the log empties it)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def full_page_screenshot(driver: Any, path: Path) -> bytes:
    driver.execute_script("window.scrollTo(0, 0)")
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(WINDOW[0], min(max(height, WINDOW[1]), 8000))
    driver.save_screenshot(str(path))
    driver.set_window_size(*WINDOW)
    return path.read_bytes()


def open_summary(driver: Any, element: Any) -> None:
    """Opens a `<details>` by its `<summary>`, as a click would. A real click can land on
    whatever covers the summary at that moment (a sticky header, a page still laying out on a
    loaded machine: ElementClickInterceptedException in CI); the element's own click() cannot."""
    driver.execute_script(
        "arguments[0].scrollIntoView({block: 'center'}); arguments[0].click()", element
    )
