"""The console's accounts table as a newcomer first sees it, measured in a real chromium at 1280 and
390 px: every control inside the viewport, no text cut. Screenshots under tests/artifacts/console/."""

from __future__ import annotations

from pathlib import Path

import httpx2
from playwright.async_api import Page, expect

from q2api.testing.simulated_services import usage_document
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.browser import LAPTOP, PHONE, RequestLog, headless_chromium, screenshot
from tests.support.gateway_harness import ADMIN_KEY, open_gateway

# Labels as people choose them: an email address is the usual long one.
LABELS = ("work-builder-id", "jane.doe@example-corporation.com", "kiro-ide")


def kiro_pro(sim: SimulatedUpstream) -> None:
    sim.services.usage = usage_document(1234.56, 10000, subscription="KIRO PRO+ (annual)")


async def add_accounts(base_url: str) -> None:
    async with httpx2.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
        for index, label in enumerate(LABELS):
            added = await http.post(
                "/admin/api/accounts",
                json={"label": label, "refresh_token": f"sim-refresh-{index}"},
            )
            assert added.status_code in (200, 201), added.text


async def clipped(page: Page, selector: str) -> list[str]:
    """The elements under `selector` that reach past the viewport, or past the box of an ancestor
    that clips or scrolls them (a table's scroll wrapper, a tab strip): cut off, or out of sight."""
    return await page.locator(selector).evaluate_all(
        """(elements) => elements.flatMap((element) => {
            const box = element.getBoundingClientRect();
            if (box.width === 0 || box.height === 0) return [];
            let right = document.documentElement.clientWidth, left = 0;
            for (let up = element.parentElement; up; up = up.parentElement) {
                if (getComputedStyle(up).overflowX !== 'visible') {
                    const frame = up.getBoundingClientRect();
                    right = Math.min(right, frame.right);
                    left = Math.max(left, frame.left);
                }
            }
            if (box.left >= left - 0.5 && box.right <= right + 0.5) return [];
            const name = element.getAttribute('aria-label') || element.textContent.trim().slice(0, 50);
            return [`${element.tagName.toLowerCase()} "${name}": ${Math.round(box.left)}..${Math.round(box.right)}`
                    + ` outside ${Math.round(left)}..${Math.round(right)}`];
        })"""
    )


async def test_the_accounts_table_fits_a_laptop_and_a_phone(tmp_path: Path) -> None:
    async with (
        open_gateway(tmp_path, prepare=kiro_pro, Q2API_ADMIN_KEY=ADMIN_KEY) as gateway,
        headless_chromium() as browser,
    ):
        await add_accounts(gateway.base_url)
        context = await browser.new_context(viewport=LAPTOP, color_scheme="light")
        page = await context.new_page()
        seen = RequestLog(page)
        await page.goto(f"{gateway.base_url}/console")
        await page.get_by_label("Admin key").fill(ADMIN_KEY)
        await page.get_by_label("Admin key").press("Enter")
        rows = page.locator("#accounts-rows tr")
        await expect(rows).to_have_count(len(LABELS) + 1)
        await expect(rows.first.locator("td[data-label='Credits']")).to_contain_text("1,234")
        problems = {}
        for name, size in (("laptop", LAPTOP), ("phone", PHONE)):
            await page.set_viewport_size(size)
            await page.wait_for_timeout(200)
            await screenshot(page, f"accounts-layout-{name}")
            problems[name] = await clipped(page, "#accounts-rows *, #tabs button")
        await context.close()
    assert problems == {"laptop": [], "phone": []}
    assert seen.problems == []
