"""The admin API on a running gateway: its key, its error envelope, each endpoint's answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from q2api.accounts.records import ENV_ACCOUNT_ID, AccountStatus
from q2api.accounts.store import SqliteAccountStore
from q2api.testing import scripts
from q2api.testing.simulated_services import usage_document
from tests.support.gateway_harness import (
    ADMIN_KEY,
    CLIENT_KEY,
    Gateway,
    ask,
    capture_logs,
    find_secrets,
    open_gateway,
)

ACCOUNT_FIELDS = {
    "id",
    "label",
    "auth_method",
    "enabled",
    "health",
    "health_until",
    "status_detail",
    "region",
    "profile_arn",
    "proxy",
    "token_expires_at",
    "stats",
    "usage",
}


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[tuple[Gateway, httpx2.AsyncClient]]:
    async with open_gateway(tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY) as gateway:
        async with httpx2.AsyncClient(
            base_url=gateway.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=20
        ) as http:
            yield gateway, http


def assert_admin_error(response: httpx2.Response, status: int, error_type: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}, body
    assert body["error"]["type"] == error_type, body
    return str(body["error"]["message"])


async def test_without_an_admin_key_every_admin_path_is_an_unknown_route(gw: Gateway) -> None:
    async with gw.http() as http:
        for method, path in (
            ("GET", "/admin/api/accounts"),
            ("POST", "/admin/api/logins"),
            ("DELETE", "/admin/api/accounts/env"),
        ):
            admin = await http.request(method, path, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
            unknown = await http.request(method, "/no/such/route")
            assert admin.status_code == unknown.status_code == 404
            assert admin.json()["error"]["type"] == unknown.json()["error"]["type"] == "not_found_error"


async def test_the_admin_key_is_required_and_a_client_key_is_not_one(admin) -> None:
    gateway, _ = admin
    async with httpx2.AsyncClient(base_url=gateway.base_url, timeout=10) as http:
        for headers in ({}, {"Authorization": f"Bearer {CLIENT_KEY}"}, {"x-api-key": ADMIN_KEY}):
            response = await http.get("/admin/api/accounts", headers=headers)
            assert_admin_error(response, 401, "unauthorized")


async def test_listing_shows_health_expiry_and_stats_without_secrets(admin) -> None:
    gateway, http = admin
    await ask(gateway.client)
    gateway.sim.enqueue(scripts.http_error(500, "InternalServerException", "boom"))
    await ask(gateway.client)  # the gateway's own retry succeeds; the failed attempt still counts
    response = await http.get("/admin/api/accounts")
    assert response.status_code == 200
    [account] = response.json()["accounts"]
    assert set(account) == ACCOUNT_FIELDS
    assert (account["id"], account["enabled"], account["health"]) == (ENV_ACCOUNT_ID, True, "ready")
    # The simulator's getUsageLimits answer (its default credits).
    assert {key: account["usage"][key] for key in ("subscription", "used", "limit")} == {
        "subscription": "KIRO FREE",
        "used": 12.5,
        "limit": 50,
    }
    assert account["token_expires_at"].endswith("Z")
    stats = account["stats"]
    assert (stats["requests"], stats["failures"]) == (3, 1)
    assert "InternalServerException" in stats["last_error"]
    assert find_secrets(response.text) == []


async def test_a_refused_refresh_token_is_a_400_and_nothing_is_stored(admin) -> None:
    gateway, http = admin
    gateway.sim.valid_refresh_tokens = {"sim-refresh-0"}
    response = await http.post("/admin/api/accounts", json={"label": "made-up", "refresh_token": "made-up-token"})
    message = assert_admin_error(response, 400, "refresh_refused")
    assert "refused" in message and "nothing was stored" in message
    assert "made-up-token" not in response.text
    labels = [account.label for account in await SqliteAccountStore(gateway.settings.data_dir).accounts()]
    assert labels == ["environment"]


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"refresh_token": "x"}, "label"),
        ({"label": "x", "refresh_token": 5}, "refresh_token"),
        ({"label": "x", "refresh_token": "x", "client_id": "only-the-id"}, "client_secret"),
        ({"label": "x", "refresh_token": "x", "region": "not a region"}, "region"),
        ({"label": "x", "refresh_token": "x", "refresh_tokn": "typo"}, "refresh_tokn"),
    ],
)
async def test_a_bad_add_body_is_a_400_naming_the_field(admin, body: dict[str, Any], named: str) -> None:
    _, http = admin
    assert named in assert_admin_error(await http.post("/admin/api/accounts", json=body), 400, "invalid_request")


async def test_a_body_that_is_not_json_is_a_400(admin) -> None:
    _, http = admin
    response = await http.post(
        "/admin/api/accounts", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert "JSON" in assert_admin_error(response, 400, "invalid_request")


async def test_rename_disable_and_unknown_accounts(admin) -> None:
    _gateway, http = admin
    renamed = await http.patch(f"/admin/api/accounts/{ENV_ACCOUNT_ID}", json={"label": "main", "enabled": False})
    assert renamed.status_code == 200, renamed.text
    assert (renamed.json()["label"], renamed.json()["enabled"], renamed.json()["health"]) == ("main", False, "disabled")
    assert (await http.get("/readyz")).status_code == 503

    assert_admin_error(await http.patch(f"/admin/api/accounts/{ENV_ACCOUNT_ID}", json={}), 400, "invalid_request")
    assert_admin_error(await http.patch("/admin/api/accounts/nope", json={"enabled": True}), 404, "not_found")
    assert_admin_error(await http.delete("/admin/api/accounts/nope"), 404, "not_found")
    assert_admin_error(await http.post("/admin/api/accounts/nope/refresh"), 404, "not_found")
    assert_admin_error(await http.get("/admin/api/logins/login_nope"), 404, "not_found")


async def test_refresh_now_renews_the_token_and_reports_a_refusal(admin) -> None:
    gateway, http = admin
    before = gateway.sim.refresh_calls
    response = await http.post(f"/admin/api/accounts/{ENV_ACCOUNT_ID}/refresh")
    assert response.status_code == 200, response.text
    assert response.json()["id"] == ENV_ACCOUNT_ID and response.json()["token_expires_at"].endswith("Z")
    assert gateway.sim.refresh_calls == before + 1
    assert find_secrets(response.text) == []

    gateway.sim.refresh_failure = "invalid_grant"
    refused = await http.post(f"/admin/api/accounts/{ENV_ACCOUNT_ID}/refresh")
    assert "invalid_grant" in assert_admin_error(refused, 400, "refresh_refused")
    assert (await SqliteAccountStore(gateway.settings.data_dir).get(ENV_ACCOUNT_ID)).status is AccountStatus.NEEDS_LOGIN
    [account] = (await http.get("/admin/api/accounts")).json()["accounts"]
    assert account["health"] == "needs_login"

    # A manual refresh that works again brings it back (e.g. after a suspension ended).
    gateway.sim.refresh_failure = None
    assert (await http.post(f"/admin/api/accounts/{ENV_ACCOUNT_ID}/refresh")).status_code == 200
    [account] = (await http.get("/admin/api/accounts")).json()["accounts"]
    assert account["health"] == "ready"


async def test_usage_is_the_accounts_credits_from_get_usage_limits(admin) -> None:
    gateway, http = admin
    gateway.sim.services.usage = usage_document(30, 50, subscription="KIRO PRO", resets_at=1_800_000_000)
    response = await http.get(f"/admin/api/accounts/{ENV_ACCOUNT_ID}/usage")
    assert response.status_code == 200
    usage = response.json()
    assert set(usage) == {"subscription", "used", "limit", "resets_at"}
    # Read at start-up and cached for Q2API_CREDITS_REFRESH_SECONDS: still the first answer.
    assert (usage["subscription"], usage["used"], usage["limit"]) == ("KIRO FREE", 12.5, 50)


@pytest.mark.parametrize(
    ("answers", "status"),
    [(["authorization_pending", "access_denied"], "denied"), (["authorization_pending", "expired_token"], "expired")],
)
async def test_a_login_that_is_denied_or_expires_says_so(admin, answers: list[str], status: str) -> None:
    gateway, http = admin
    gateway.sim.device.interval = 0.01
    gateway.sim.device.answers.clear()
    gateway.sim.device.answers.extend(answers)
    started = await http.post("/admin/api/logins", json={"label": "nobody", "method": "builder-id"})
    assert started.status_code == 201, started.text
    login_id = started.json()["login_id"]
    for _ in range(200):
        answer = (await http.get(f"/admin/api/logins/{login_id}")).json()
        if answer["status"] != "pending":
            break
        await asyncio.sleep(0.05)
    assert answer["status"] == status and "account_id" not in answer
    assert [account.label for account in await SqliteAccountStore(gateway.settings.data_dir).accounts()] == [
        "environment"
    ]


async def test_an_idc_login_needs_its_start_url(admin) -> None:
    _, http = admin
    response = await http.post("/admin/api/logins", json={"label": "corp", "method": "idc"})
    assert "start URL" in assert_admin_error(response, 400, "invalid_request")
    response = await http.post("/admin/api/logins", json={"label": "corp", "method": "sso"})
    assert "method" in assert_admin_error(response, 400, "invalid_request")


async def test_admin_requests_are_logged_without_secrets(tmp_path: Path) -> None:
    with capture_logs() as logs:
        async with open_gateway(tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY) as gateway:
            async with httpx2.AsyncClient(base_url=gateway.base_url, timeout=10) as http:
                await http.get("/admin/api/accounts", headers={"Authorization": "Bearer wrong-key"})
                added = await http.post(
                    "/admin/api/accounts",
                    json={"label": "kiro", "refresh_token": "sim-refresh-77"},
                    headers={"Authorization": f"Bearer {ADMIN_KEY}"},
                )
                assert added.status_code == 201
    assert any(line.level == "WARNING" and "admin request refused" in line.message for line in logs.lines)
    [entry] = [line.extra for line in logs.lines if line.extra.get("action") == "add account"]
    assert (entry["actor"], entry["label"], entry["account_id"]) == ("admin", "kiro", added.json()["id"])
    assert find_secrets(logs.text) == [] and "wrong-key" not in logs.text


async def test_console_polls_are_debug_lines_of_the_audit_log_and_changes_info(admin) -> None:
    """Ten polls of an open console's lists write no INFO line; a change still does."""
    _, client = admin
    with capture_logs() as logs:
        for _ in range(10):
            assert (await client.get("/admin/api/accounts")).status_code == 200
            assert (await client.get("/admin/api/keys")).status_code == 200
        assert (await client.post("/admin/api/keys", json={"label": "made-here"})).status_code in (200, 201)
    audited = [(line.level, line.message) for line in logs.lines if line.message.startswith("admin ")]
    assert audited.count(("DEBUG", "admin list accounts")) == 10
    assert audited.count(("DEBUG", "admin list keys")) == 10
    assert [entry for entry in audited if entry[0] != "DEBUG"] == [("INFO", "admin create key")]
