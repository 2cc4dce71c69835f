"""The Keys and Usage panels in a real headless chromium: a key created in the console is shown once,
its spend is shown against its budget, and the usage page's figures and charts agree with the
requests sent (and with `/admin/api/usage`), at laptop and phone widths, under the console's CSP."""

from __future__ import annotations

import time
from pathlib import Path

import httpx2
from playwright.async_api import Page, expect

from q2api.tenants.database import open_tenant_database
from q2api.tenants.ledger import UsageLedger, UsageRow
from q2api.testing import scripts
from tests.support.browser import LAPTOP, PHONE, RequestLog, headless_chromium, screenshot
from tests.support.gateway_harness import ADMIN_KEY, CLIENT_KEY, JSON_BODY, MODEL, Gateway, open_gateway

CREDITS = 0.05
SEEDED_DAYS = {1: ("alpha", 7), 2: ("beta", 4), 3: ("alpha", 9), 5: ("beta", 2)}  # days ago → (key, requests)


async def seed_earlier_days(data_dir: Path) -> int:
    """Ledger rows of the past days (as other workers would have written them); how many."""
    database = await open_tenant_database(None, data_dir)
    ledger = UsageLedger(database, retention_days=90)
    now = time.time()
    for days_ago, (label, count) in SEEDED_DAYS.items():
        for n in range(count):
            ledger.record(
                UsageRow(
                    now - days_ago * 86400 - n * 60,
                    f"req_seed{days_ago}{n}",
                    label,
                    "environment",
                    MODEL,
                    "/v1/messages",
                    200,
                    100,
                    20,
                    0,
                    0,
                    0.1,
                    False,
                    300.0 + n * 10,
                    900.0,
                )
            )
    await ledger.close()
    await database.close()
    return sum(count for _label, count in SEEDED_DAYS.values())


async def send(gw: Gateway, key: str, path: str = "/v1/messages", model: str = MODEL) -> int:
    body = {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    async with httpx2.AsyncClient(base_url=gw.base_url, timeout=20) as http:
        response = await http.post(path, json=body, headers={**JSON_BODY, "authorization": f"Bearer {key}"})
        return response.status_code


async def create_key_in_console(page: Page, label: str, **fields: str) -> str:
    form = page.locator("#key-form")
    await form.get_by_label("Label").fill(label)
    for name, value in fields.items():
        await form.locator(f"[name={name}]").fill(value)
    await form.get_by_role("button", name="Create key").click()
    await expect(page.locator("#key-created-label")).to_have_text(label)
    key = (await page.locator("#key-created-value").text_content()) or ""
    assert key.startswith("q2k_")
    await page.locator("#key-created-done").click()
    await expect(page.locator("#key-created")).to_be_hidden()
    assert key not in (await page.content())  # gone from the page once dismissed
    return key


async def test_keys_and_usage_panels(tmp_path: Path) -> None:
    seeded = await seed_earlier_days(tmp_path)

    def metered(sim) -> None:
        sim.responder = lambda record: scripts.stream(
            scripts.conversation_event(),
            scripts.text_events("ok"),
            scripts.usage_event(30, 6),
            scripts.metering_event(CREDITS),
        )

    async with open_gateway(tmp_path, prepare=metered, Q2API_ADMIN_KEY=ADMIN_KEY) as gw, headless_chromium() as browser:
        context = await browser.new_context(viewport=LAPTOP)
        page = await context.new_page()
        requests = RequestLog(page)
        await page.goto(f"{gw.base_url}/console")
        await page.get_by_label("Admin key").fill(ADMIN_KEY)
        await page.get_by_label("Admin key").press("Enter")
        await page.locator("#tabs").get_by_role("button", name="Keys", exact=True).click()
        await expect(page.locator("#keys-empty")).to_be_visible()
        alpha = await create_key_in_console(page, "alpha", models=MODEL, credits_per_day="1", rpm="30")
        beta = await create_key_in_console(page, "beta", credits_per_month="20")

        sent = {"alpha": [await send(gw, alpha) for _ in range(5)], "beta": []}
        sent["alpha"].append(await send(gw, alpha, model="claude-haiku-4-5"))  # 403: the key's models
        sent["beta"] = [await send(gw, beta, "/v1/chat/completions") for _ in range(3)]
        env = [await send(gw, CLIENT_KEY) for _ in range(2)]
        assert sent["alpha"] == [200] * 5 + [403] and sent["beta"] == [200] * 3 and env == [200, 200]

        # Spend against the budget, in the keys panel.
        alpha_row = page.locator("#keys-rows tr").filter(has_text="alpha")
        await expect(alpha_row).to_contain_text("0.25 / 1", timeout=10_000)
        await expect(alpha_row.locator("meter")).to_have_attribute("value", "0.25")
        await screenshot(page, "keys-laptop")

        # The activity names each request's store key by its label (an environment key: —).
        await page.locator("#tabs").get_by_role("button", name="Activity", exact=True).click()
        keys_shown = page.locator("#activity-rows td[data-label='Key']")
        await expect(keys_shown.filter(has_text="alpha")).to_have_count(6)
        await expect(keys_shown.filter(has_text="beta")).to_have_count(3)

        # The usage page: today's requests plus the seeded days, in the tiles and the charts.
        await page.locator("#tabs").get_by_role("button", name="Usage", exact=True).click()
        total = seeded + 11
        await expect(page.locator("#usage-requests")).to_have_text(str(total))
        await expect(page.locator("#usage-errors")).to_have_text(f"{100 / total:.1f} %")
        await expect(page.locator("#usage-credits-chart canvas")).to_have_count(1)
        await expect(page.locator("#usage-requests-chart .u-legend")).to_contain_text("alpha")
        async with httpx2.AsyncClient(base_url=gw.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
            by_key = {row["key"]: row for row in (await http.get("/admin/api/usage?by=key&since=7d")).json()["rows"]}
        assert by_key["alpha"]["requests"] == 6 + 7 + 9 and by_key["beta"]["requests"] == 3 + 4 + 2
        assert by_key["(environment key)"]["requests"] == 2
        top_keys = page.locator("#usage-top-keys tr")
        await expect(top_keys.filter(has_text="alpha")).to_contain_text(str(by_key["alpha"]["requests"]))
        await screenshot(page, "usage-7d-by-key-laptop")

        await page.locator("#usage-stack").get_by_role("button", name="By model").click()
        await expect(page.locator("#usage-requests-chart .u-legend")).to_contain_text(MODEL)
        await page.locator("#usage-range").get_by_role("button", name="24 h").click()
        await expect(page.locator("#usage-requests")).to_have_text("11")
        await screenshot(page, "usage-24h-by-model-laptop")

        phone = await browser.new_context(viewport=PHONE, is_mobile=True, color_scheme="dark")
        small = await phone.new_page()
        small_requests = RequestLog(small)
        await small.goto(f"{gw.base_url}/console")
        await small.get_by_label("Admin key").fill(ADMIN_KEY)
        await small.get_by_label("Admin key").press("Enter")
        await small.locator("#tabs").get_by_role("button", name="Usage", exact=True).click()
        await expect(small.locator("#usage-requests")).to_have_text(str(total))
        await expect(small.locator("#usage-credits-chart canvas")).to_have_count(1)
        await screenshot(small, "usage-7d-by-key-phone-dark")
        width = await small.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the usage page scrolls sideways on a phone ({width} px)"
        # Each top table fits its card: no column cut off behind a scroll nothing shows.
        for table in ("usage-top-keys", "usage-top-models"):
            fit = await small.evaluate(
                """(id) => {
                    const wrap = document.getElementById(id).closest(".table-wrap");
                    const card = wrap.closest(".card");
                    const table = wrap.querySelector("table");
                    return {table: table.getBoundingClientRect().width, wrap: wrap.clientWidth,
                            scroll: wrap.scrollWidth, card: card.clientWidth};
                }""",
                table,
            )
            assert fit["scroll"] <= fit["wrap"] and fit["table"] <= fit["card"], (table, fit)
        await small.locator("#usage-top-keys").scroll_into_view_if_needed()
        await screenshot(small, "usage-top-keys-phone-dark")
        await small.locator("#tabs").get_by_role("button", name="Keys", exact=True).click()
        await expect(small.locator("#keys-rows tr")).to_have_count(2)
        await screenshot(small, "keys-phone-dark")

        for log in (requests, small_requests):
            assert log.problems == []  # no CSP violation, no script error
            assert all(url.startswith(gw.base_url) for url in log.urls), log.urls
        await context.close()
        await phone.close()
