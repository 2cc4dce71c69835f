"""The console's Captures panel in a real headless chromium: a request Amazon Q refused shows up as a
capture, marked in Activity, downloads as the capture file (with the admin key in a header only),
and goes when removed."""

from __future__ import annotations

from pathlib import Path

import anthropic
import orjson
import pytest
from playwright.async_api import expect

from q2api.testing import scripts
from tests.support.browser import LAPTOP, RequestLog, headless_chromium, screenshot
from tests.support.captures import wait_for_capture
from tests.support.gateway_harness import ADMIN_KEY, MODEL, capture_logs, open_gateway, user


async def test_the_captures_panel_lists_downloads_and_removes_a_capture(tmp_path: Path) -> None:
    captures = tmp_path / "captures"
    async with open_gateway(tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY, Q2API_CAPTURE_DIR=str(captures)) as gateway:
        gateway.sim.enqueue(scripts.improperly_formed())
        with capture_logs() as logs, pytest.raises(anthropic.BadRequestError):
            await gateway.client.messages.create(model=MODEL, max_tokens=50, messages=[user("hello")])
        [line] = logs.request_lines()
        capture_id, request_id = line.extra["capture"], line.extra["request_id"]
        await wait_for_capture(captures, capture_id)

        async with headless_chromium() as browser:
            context = await browser.new_context(viewport=LAPTOP, accept_downloads=True)
            page = await context.new_page()
            page.set_default_timeout(10_000)
            seen = RequestLog(page)
            await page.goto(f"{gateway.base_url}/console")
            await page.get_by_label("Admin key").fill(ADMIN_KEY)
            await page.get_by_role("button", name="Sign in").click()

            await page.locator("#tabs").get_by_role("button", name="Activity", exact=True).click()
            await expect(page.locator(f'tr[data-request-id="{request_id}"] .badge.capture')).to_have_text("captured")

            await page.locator("#tabs").get_by_role("button", name="Captures", exact=True).click()
            row = page.locator(f'#captures-rows tr[data-capture-id="{capture_id}"]')
            await expect(row).to_contain_text(request_id)
            await expect(row).to_contain_text("upstream_rejected")
            await expect(page.locator("#captures-settings")).to_contain_text("Q2API_CAPTURE=failures")
            await screenshot(page, "captures-laptop-light")

            async with page.expect_download() as download_info:
                await row.get_by_role("button", name="Download").click()
            download = await download_info.value
            assert download.suggested_filename == f"{capture_id}.json"
            saved = Path(await download.path())
            assert orjson.loads(saved.read_bytes())["summary"]["id"] == capture_id

            await row.get_by_role("button", name="Remove").click()
            await page.locator("#confirm-dialog").get_by_role("button", name="Remove", exact=True).click()
            await expect(row).to_have_count(0)
            await expect(page.get_by_text("No captures")).to_be_visible()
            await context.close()
    assert not (captures / f"{capture_id}.json").exists()
    assert seen.problems == [], seen.problems  # no script error, no CSP violation
    assert not [url for url in seen.urls if ADMIN_KEY in url]
