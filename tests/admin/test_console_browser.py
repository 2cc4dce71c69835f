"""The web console in a real headless chromium, against a real gateway and the simulated upstream.

One journey, as an operator would make it: sign in (a wrong key first), add an
account by refresh token, log one in with a device code, switch one off with
the keyboard, rename one, send a chat message and watch it stream, find it in
Activity, remove accounts down to the empty state — then check that the page
talked to nobody but the gateway and that the admin key never reached a URL,
a cookie, local storage or the log. Screenshots of every panel at laptop and
phone widths, light and dark, are kept under tests/artifacts/console/.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx2
from playwright.async_api import Locator, Page, expect

from q2api.testing import scripts
from q2api.testing.simulated_upstream import SIM_CLIENT_ID, SIM_CLIENT_SECRET
from tests.support.browser import LAPTOP, PHONE, RequestLog, headless_chromium, screenshot
from tests.support.gateway_harness import (
    ADMIN_KEY,
    CLIENT_KEY,
    MODEL,
    REQUEST_ID,
    Gateway,
    capture_logs,
    find_secrets,
    open_gateway,
)

PASTED_REFRESH_TOKEN = "sim-refresh-4242"  # a shape find_secrets knows: it must not reach the log
PASTED_API_KEY = "ksk_console-4242"  # a Kiro API key (find_secrets knows the shape too)
REPLY = "The whole chain works, piece by piece, as it streams."
PANELS = ("Accounts", "Models", "Try it", "Activity")


def account_row(page: Page, label: str) -> Locator:
    return page.locator("#accounts-rows tr").filter(has=page.locator(".account-label").get_by_text(label, exact=True))


def tab(page: Page, name: str) -> Locator:
    return page.locator("#tabs").get_by_role("button", name=name, exact=True)


async def admin_accounts(gateway: Gateway) -> dict[str, dict]:
    async with httpx2.AsyncClient(base_url=gateway.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
        return {account["label"]: account for account in (await http.get("/admin/api/accounts")).json()["accounts"]}


async def sign_in(page: Page, gateway: Gateway) -> None:
    await page.goto(f"{gateway.base_url}/console")
    key = page.get_by_label("Admin key")
    await key.fill("not-the-admin-key")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#sign-in-error")).to_contain_text("That admin key was refused")
    await screenshot(page, "sign-in-refused-laptop-light")
    await key.fill(ADMIN_KEY)
    await key.press("Enter")
    await expect(account_row(page, "environment")).to_be_visible()
    await page.reload()  # the key is kept for the tab's life: no second sign-in
    await expect(account_row(page, "environment")).to_be_visible()


async def add_by_api_key(page: Page, gateway: Gateway) -> None:
    """A Kiro API key added in the form serves as its own account; it is shown as one, then removed."""
    gateway.sim.add_api_key(PASTED_API_KEY)
    form = page.locator("#add-form")
    await form.get_by_label("Label").fill("ci-key")
    await form.get_by_label("or Kiro API key").fill(PASTED_API_KEY)
    await form.get_by_role("button", name="Add account").click()
    row = account_row(page, "ci-key")
    await expect(row.locator(".badge")).to_have_text("Ready")
    await expect(row).to_contain_text("Kiro API key")
    await expect(form.get_by_label("or Kiro API key")).to_have_value("")  # not left on the page
    assert (await admin_accounts(gateway))["ci-key"]["auth_method"] == "api_key"
    await row.get_by_role("button", name="Remove ci-key").click()
    await page.locator("#confirm-dialog").get_by_role("button", name="Remove", exact=True).click()
    await expect(account_row(page, "ci-key")).to_have_count(0)


async def add_by_refresh_token(page: Page) -> None:
    form = page.locator("#add-form")
    await form.get_by_label("Label").fill("team")
    await form.get_by_label("Refresh token").fill(PASTED_REFRESH_TOKEN)
    await form.get_by_text("Builder ID / IAM Identity Center client").click()
    await form.get_by_label("Client id").fill(SIM_CLIENT_ID)
    await form.get_by_label("Client secret").fill(SIM_CLIENT_SECRET)
    await form.get_by_role("button", name="Add account").click()
    await expect(account_row(page, "team")).to_be_visible()
    await expect(account_row(page, "team").locator(".badge")).to_have_text("Ready")
    await expect(form.get_by_label("Refresh token")).to_have_value("")  # not left on the page
    await account_row(page, "team").get_by_role("button", name="Refresh team").click()
    await expect(page.locator("#toasts")).to_contain_text("team: new access token")


async def device_login(page: Page, gateway: Gateway) -> None:
    # The user takes a moment to approve: the console must show its progress meanwhile.
    gateway.sim.device.interval = 0.2
    gateway.sim.device.answers.clear()
    gateway.sim.device.answers.extend(["authorization_pending"] * 12)
    form = page.locator("#login-form")
    await form.get_by_label("Label").fill("laptop")
    await form.get_by_role("button", name="Start login").click()
    code = page.locator("#login-code")
    await expect(code).to_have_text(re.compile(r"^SIMU-\d{4}$"))
    user_code = await code.text_content()
    await expect(page.locator("#login-link")).to_have_attribute(
        "href", f"{gateway.sim.base_url}/device?user_code={user_code}"
    )
    await page.get_by_role("button", name="Copy code").click()
    assert await page.evaluate("navigator.clipboard.readText()") == user_code
    await expect(page.locator("#login-status")).to_contain_text("so far")  # the console is polling
    await screenshot(page, "device-login-waiting-laptop-light")
    await expect(page.locator("#login-status")).to_contain_text("Done: laptop is logged in", timeout=20_000)
    await expect(account_row(page, "laptop")).to_be_visible()
    assert gateway.sim.device.polls[-1][1] == "grant"


async def switch_off_with_the_keyboard(page: Page, gateway: Gateway) -> None:
    switch = account_row(page, "team").get_by_role("switch")
    await expect(switch).to_be_checked()
    await switch.focus()
    await page.keyboard.press("Space")
    await expect(switch).not_to_be_checked()
    await expect(account_row(page, "team").locator(".badge")).to_have_text("Disabled")
    assert (await admin_accounts(gateway))["team"]["enabled"] is False


async def rename(page: Page) -> None:
    await account_row(page, "laptop").get_by_role("button", name="Rename laptop").click()
    dialog = page.locator("#rename-dialog")
    await dialog.get_by_label("New label").fill("laptop-2")
    await dialog.get_by_role("button", name="Rename", exact=True).click()
    await expect(account_row(page, "laptop-2")).to_be_visible()


async def refreshes_in_place(page: Page) -> None:
    """A periodic refresh updates the rows it has instead of rebuilding the table."""
    rows = page.locator("#accounts-rows tr")
    await rows.evaluate_all("rows => rows.forEach(row => { row.dataset.seen = 'before' })")
    updated = page.locator("#accounts-updated")
    before = await updated.text_content()
    await expect(updated).not_to_have_text(before or "", timeout=15_000)
    await expect(page.locator("#accounts-rows tr[data-seen=before]")).to_have_count(await rows.count())


async def models(page: Page, gateway: Gateway) -> None:
    await tab(page, "Models").click()
    async with gateway.http() as http:
        catalogue = (await http.get("/v1/models", params={"limit": "1000"})).json()["data"]
    rows = page.locator("#models-rows tr")
    await expect(rows).to_have_count(len(catalogue))
    await expect(rows.first.locator("code")).to_have_text(catalogue[0]["id"])
    await expect(rows.first.locator("td[data-label='Context window']")).to_have_text(
        f"{catalogue[0]['max_input_tokens'] // 1000}K"
    )


async def chat(page: Page, gateway: Gateway) -> str:
    await tab(page, "Try it").click()
    await page.locator("#try-model").select_option(MODEL)
    prompt = page.get_by_label("Message")
    await page.get_by_label("Client key").fill("not-a-client-key")
    await prompt.fill("Does the whole chain work?")
    await page.get_by_role("button", name="Send").click()
    await expect(page.locator("#try-error")).to_contain_text("401 authentication_error")
    await expect(prompt).to_have_value("Does the whole chain work?")  # kept for another try

    gateway.sim.enqueue(scripts.text_reply(REPLY, chunks=8, delay=0.2))
    await page.get_by_label("Client key").fill(CLIENT_KEY)
    await page.get_by_role("button", name="Send").click()
    # Seen while it streams: part of the text, not yet the whole.
    await page.wait_for_function(
        """whole => {
            const text = document.querySelector('.bubble.assistant.streaming .bubble-text')?.textContent ?? '';
            return text.length > 0 && text !== whole;
        }""",
        arg=REPLY,
    )
    await expect(page.locator(".bubble.assistant .bubble-text")).to_have_text(REPLY)
    await expect(page.locator("#fact-request-id")).to_have_text(REQUEST_ID)
    await expect(page.locator("#fact-status")).to_have_text(re.compile(r"^200\b"))
    await expect(page.locator("#fact-ttft")).to_have_text(re.compile(r"^\d+(\.\d+)? m?s$"))
    await expect(page.locator("#fact-stop")).to_have_text("end_turn")
    await expect(page.locator("#fact-usage")).to_have_text(re.compile(r"^\d[\d,]* in / \d+ out$"))
    await expect(page.locator("#try-error")).to_be_hidden()
    return str(await page.locator("#fact-request-id").text_content())


async def activity(page: Page, request_id: str) -> None:
    await tab(page, "Activity").click()
    entry = page.locator(f"#activity-rows tr[data-request-id='{request_id}']")
    await expect(entry).to_be_visible()
    await expect(page.locator("#activity-rows tr").first).to_have_attribute("data-request-id", request_id)
    await expect(entry.locator("td[data-label='Status']")).to_have_text("200")
    await expect(entry.locator("td[data-label='Model']")).to_have_text(MODEL)
    await expect(entry.locator("td[data-label='Account']")).to_have_text(re.compile(r"^(environment|laptop-2)$"))
    await expect(entry.locator("td[data-label='Outcome']")).to_have_text("end_turn")
    refused = page.locator("#activity-rows tr").nth(1)
    await expect(refused.locator("td[data-label='Status']")).to_have_text("401")


async def screenshots(page: Page) -> None:
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        for width_name, size in (("laptop", LAPTOP), ("phone", PHONE)):
            await page.set_viewport_size(size)
            for panel in PANELS:
                await tab(page, panel).click()
                await expect(page.locator(f"#panel-{'try' if panel == 'Try it' else panel.lower()}")).to_be_visible()
                await screenshot(page, f"{panel.lower().replace(' ', '-')}-{width_name}-{scheme}")
    await page.emulate_media(color_scheme="light")
    await page.set_viewport_size(LAPTOP)


async def remove_everything(page: Page) -> None:
    await tab(page, "Accounts").click()
    dialog = page.locator("#confirm-dialog")
    await account_row(page, "team").get_by_role("button", name="Remove team").click()
    await expect(dialog).to_contain_text("Remove team?")
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(account_row(page, "team")).to_be_visible()  # a cancelled removal removes nothing
    for label in ("team", "laptop-2", "environment"):
        await account_row(page, label).get_by_role("button", name=f"Remove {label}").click()
        await dialog.get_by_role("button", name="Remove", exact=True).click()
        await expect(account_row(page, label)).to_have_count(0)
    await expect(page.get_by_text("No accounts yet — add one or log in.")).to_be_visible()
    await expect(page.locator("#accounts-table")).to_be_hidden()
    await screenshot(page, "accounts-empty-laptop-light")
    await page.emulate_media(color_scheme="dark")
    await page.set_viewport_size(PHONE)
    await screenshot(page, "accounts-empty-phone-dark")


async def test_the_console_runs_the_gateway_from_a_browser(tmp_path: Path) -> None:
    with capture_logs() as logs:
        async with open_gateway(tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY) as gateway, headless_chromium() as browser:
            context = await browser.new_context(viewport=LAPTOP, color_scheme="light")
            await context.grant_permissions(["clipboard-read", "clipboard-write"], origin=gateway.base_url)
            page = await context.new_page()
            page.set_default_timeout(10_000)
            seen = RequestLog(page)

            await sign_in(page, gateway)
            await add_by_refresh_token(page)
            await add_by_api_key(page, gateway)
            await device_login(page, gateway)
            await switch_off_with_the_keyboard(page, gateway)
            await rename(page)
            await refreshes_in_place(page)
            await models(page, gateway)
            request_id = await chat(page, gateway)
            await activity(page, request_id)
            await screenshots(page)

            # Where the admin key is, and where it is not.
            assert await page.evaluate("sessionStorage.getItem('q2api.adminKey')") == ADMIN_KEY
            assert await page.evaluate("localStorage.length") == 0
            assert await context.cookies() == []
            await remove_everything(page)
            await page.get_by_role("button", name="Sign out").click()
            await expect(page.get_by_label("Admin key")).to_be_visible()
            await screenshot(page, "sign-in-phone-dark")
            assert await page.evaluate("sessionStorage.length") == 0
            await context.close()

    assert seen.urls, "the request log recorded nothing"
    elsewhere = [url for url in seen.urls if not url.startswith(f"{gateway.base_url}/") and not url.startswith("data:")]
    assert elsewhere == [], elsewhere
    assert not [url for url in seen.urls if ADMIN_KEY in url or CLIENT_KEY in url]
    assert seen.problems == [], seen.problems  # no script error, no CSP violation
    assert ADMIN_KEY not in logs.text
    assert find_secrets(logs.text) == []
    assert PASTED_REFRESH_TOKEN not in logs.text and PASTED_API_KEY not in logs.text
