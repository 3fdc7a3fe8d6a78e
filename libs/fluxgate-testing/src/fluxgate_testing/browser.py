"""Debian's headless Chromium driven by Selenium through Debian's chromedriver (both installed
by `make install`): the browser the console's page is checked in, as a person would see it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ARTIFACTS = Path(__file__).resolve().parents[4] / ".local" / "artifacts"  # ignored by git; CI keeps it


@contextmanager
def chromium(width: int = 1600, height: int = 1300) -> Iterator[Any]:
    """A headless Chromium window; no skip without it: a missing browser fails the test."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        options.add_argument(flag)
    browser = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    try:
        yield browser
    finally:
        browser.quit()


def screenshot(browser: Any, name: str) -> Path:
    """Save the page as ``.local/artifacts/<name>`` (the full height of the page)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = int(browser.execute_script("return document.documentElement.scrollHeight"))
    browser.set_window_size(int(browser.get_window_size()["width"]), min(max(height, 800), 6000))
    path = ARTIFACTS / name
    browser.save_screenshot(str(path))
    return path


def click_when_ready(wait: Any, by: str, selector: str) -> None:
    """Click the element ``selector`` finds once it can be clicked, found again on every try:
    a page that refreshes its parts (the console's, every second) may replace the element
    between finding it and clicking it (a stale element, seen in CI)."""
    from selenium.common.exceptions import (
        ElementClickInterceptedException,
        ElementNotInteractableException,
        NoSuchElementException,
        StaleElementReferenceException,
    )

    passing = (ElementClickInterceptedException, ElementNotInteractableException, NoSuchElementException,
               StaleElementReferenceException)  # fmt: skip

    def clicked(driver: Any) -> bool:
        try:
            driver.find_element(by, selector).click()
        except passing:
            return False
        return True

    wait.until(clicked)
