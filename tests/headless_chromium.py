"""A real headless Chromium for the web UI's tests, driven by selenium through Debian's
`chromium` and `chromium-driver` (deploy/install-test-deps.sh installs them)."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Iterator

import pytest

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")


def require_chromium() -> None:
    """Skip the module on a machine without the browser; on CI its absence is a failure."""
    if CHROMIUM and CHROMEDRIVER:
        return
    reason = "headless Chromium is not installed (deploy/install-test-deps.sh installs chromium, chromium-driver)"
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator["webdriver.Chrome"]:  # noqa: F821
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # --no-sandbox: tests run as root here; /dev/shm is small in containers.
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--lang=en-US"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver) -> list[str]:
    """SEVERE entries of the browser's console since the last call (JavaScript errors, failed
    requests of the page)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def screenshot(driver, path: Path) -> Path:
    """The whole page (the window grown to its height), and a copy where
    $STORM_PY_UI_SCREENSHOTS points (how docs/images is refreshed)."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    width = driver.get_window_size()["width"]
    driver.set_window_size(width, min(max(int(height) + 40, 600), 4000))
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    copy_to = os.environ.get("STORM_PY_UI_SCREENSHOTS")
    if copy_to:
        Path(copy_to).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(copy_to) / path.name)
    driver.set_window_size(width, 1000)
    return path
