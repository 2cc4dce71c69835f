"""A real headless browser for the console's tests: Debian's chromium driven by Playwright.

Playwright's own browser download cannot work on the test machines, so the
browser is the system's `chromium` (`.ci/run` installs it); a test that needs
it is skipped, saying why, only when no chromium can be found.

    async with headless_chromium() as browser:
        context = await browser.new_context(viewport=LAPTOP)
        page = await context.new_page()
        requests = RequestLog(page)

Screenshots go to ARTIFACTS (git-ignored) and are kept after the run.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, Request, ViewportSize, async_playwright

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
LAPTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
# No sandbox (CI runs as root), no GPU, and none of chromium's own background traffic
# (component updates, safe browsing), so every request the page makes is the console's.
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def chromium_path() -> str | None:
    found = shutil.which("chromium")
    if found is None and Path("/usr/bin/chromium").exists():
        found = "/usr/bin/chromium"
    return found


@contextlib.asynccontextmanager
async def headless_chromium() -> AsyncIterator[Browser]:
    executable = chromium_path()
    if executable is None:
        pytest.skip("no chromium on this machine (install Debian's `chromium` package; .ci/run does)")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


class RequestLog:
    """Every URL the page requested, and every problem it reported (script errors, CSP violations)."""

    def __init__(self, page: Page) -> None:
        self.urls: list[str] = []
        self.problems: list[str] = []
        page.on("request", self._request)
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))

    def _request(self, request: Request) -> None:
        self.urls.append(request.url)

    def _console(self, message: ConsoleMessage) -> None:
        # A refused key or account action is an answered request, which chromium reports as a
        # failed resource load; anything else at error level (a CSP violation, a script error) is a defect.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.problems.append(message.text)


async def screenshot(page: Page, name: str) -> Path:
    """A full-page PNG under ARTIFACTS, for people to look at."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    await page.evaluate("window.scrollTo(0, 0)")  # a sticky header would otherwise land mid-page
    await page.screenshot(path=str(path), full_page=True, animations="disabled", caret="hide")
    return path
