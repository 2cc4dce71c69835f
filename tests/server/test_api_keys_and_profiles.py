"""Kiro API keys as accounts, and each login's Amazon Q profile, end to end: the real gateway on
loopback, the simulated Amazon Q (which takes a key only with `tokentype: API_KEY`, lists profiles
only to IdC logins), the official SDK as client and the admin API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from q2api.accounts.opening import opened_account_store
from q2api.accounts.records import ENV_ACCOUNT_ID, AccountStatus
from q2api.settings import Settings, load_settings
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_services import SIM_IDC_PROFILE_ARN, profile_entry
from q2api.testing.simulated_upstream import SIM_REFRESH_TOKEN, SimulatedUpstream
from tests.support.gateway_harness import ADMIN_KEY, CLIENT_KEY, ask, capture_logs, gateway_settings, sdk

API_KEY = "ksk_sim-0a1b2c3d4e5f60718293a4b5c6d7e8f9"


def key_settings(sim: SimulatedUpstream, data_dir: Path, **env: str) -> Settings:
    """A gateway whose one account is AMAZONQ_API_KEY, with the admin API on."""
    values = {
        "AMAZONQ_ENDPOINT": sim.url,
        "AMAZONQ_OIDC_ENDPOINT": sim.oidc_url,
        "AMAZONQ_KIRO_REFRESH_ENDPOINT": sim.kiro_refresh_url,
        "Q2API_DATA_DIR": str(data_dir),
        "Q2API_API_KEYS": CLIENT_KEY,
        "Q2API_ADMIN_KEY": ADMIN_KEY,
        **env,
    }
    return load_settings(values, env_file=None)


def admin_client(url: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=20)


async def stored_account(settings: Settings, account_id: str) -> Any:
    async with opened_account_store(settings.database_url, settings.data_dir, settings.secret_key) as store:
        return await store.get(account_id)


# -- Kiro API keys ------------------------------------------------------------------


async def test_an_api_key_environment_account_serves_with_tokentype_and_is_never_refreshed(tmp_path: Path) -> None:
    async with SimulatedUpstream(check_tokens=True) as sim:
        sim.add_api_key(API_KEY)
        sim.services.profiles = [profile_entry(SIM_IDC_PROFILE_ARN)]
        settings = key_settings(sim, tmp_path, AMAZONQ_API_KEY=API_KEY)
        with capture_logs() as logs:
            async with running_gateway(settings) as url, sdk(url) as client:
                assert "a key works" in await ask(client, "a key works")
                assert "streamed too" in await ask(client, "streamed too", stream=True)
                async with admin_client(url) as admin:
                    [account] = (await admin.get("/admin/api/accounts")).json()["accounts"]
        for record in sim.requests:
            assert record.headers["Authorization"] == f"Bearer {API_KEY}"
            assert record.headers["tokentype"] == "API_KEY"
            assert "profileArn" not in record.body  # none is sent with a key
        assert sim.refresh_calls == 0 and sim.services.profile_requests == []
        assert ("rest", "ListAvailableModels") in {(flavour, op) for flavour, op, _ in sim.services.requests}
        assert (account["auth_method"], account["health"], account["profile_arn"]) == ("api_key", "ready", None)
        assert API_KEY not in logs.text and API_KEY not in str(account)


async def test_a_key_amazon_q_refuses_marks_the_account_needs_login_without_a_refresh(tmp_path: Path) -> None:
    async with SimulatedUpstream(check_tokens=True) as sim:
        sim.add_api_key(API_KEY)
        settings = key_settings(sim, tmp_path, AMAZONQ_API_KEY=API_KEY)
        async with running_gateway(settings) as url, sdk(url) as client:
            sim.api_keys.discard(API_KEY)  # revoked at app.kiro.dev
            with pytest.raises(anthropic.APIStatusError) as caught:
                await ask(client, "still there?")
            assert caught.value.status_code in (401, 403, 503)
            assert API_KEY not in caught.value.response.text
        stored = await stored_account(settings, ENV_ACCOUNT_ID)
        assert stored.status is AccountStatus.NEEDS_LOGIN and "API key" in stored.status_detail
        assert sim.refresh_calls == 0


async def test_a_key_sent_without_its_token_type_is_refused_by_the_simulated_upstream(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim, httpx2.AsyncClient() as http:
        sim.add_api_key(API_KEY)
        body = {"conversationState": {"currentMessage": {"userInputMessage": {"content": "hi"}}}}
        bare = await http.post(sim.url, json=body, headers={"Authorization": f"Bearer {API_KEY}"})
        typed = await http.post(
            sim.url, json=body, headers={"Authorization": f"Bearer {API_KEY}", "TokenType": "API_KEY"}
        )
        assert bare.status_code == 403 and "bearer token" in bare.text
        assert typed.status_code == 200


async def test_the_admin_api_adds_a_key_checked_by_one_call_and_refuses_a_made_up_one(tmp_path: Path) -> None:
    async with SimulatedUpstream(check_tokens=True) as sim:
        sim.add_api_key(API_KEY)
        settings = key_settings(sim, tmp_path)
        async with running_gateway(settings) as url, admin_client(url) as admin:
            made_up = await admin.post("/admin/api/accounts", json={"label": "ci", "api_key": "ksk_made-up-key"})
            assert made_up.status_code == 400 and made_up.json()["error"]["type"] == "refresh_refused"
            assert "ksk_made-up-key" not in made_up.text
            assert (await admin.get("/admin/api/accounts")).json()["accounts"] == []

            both = await admin.post(
                "/admin/api/accounts", json={"label": "ci", "api_key": API_KEY, "refresh_token": "r"}
            )
            assert both.status_code == 400 and "api_key" in both.json()["error"]["message"]

            usage_calls = len(sim.services.requests)
            added = await admin.post("/admin/api/accounts", json={"label": "ci", "api_key": API_KEY})
            assert added.status_code == 201, added.text
            assert added.json()["auth_method"] == "api_key" and API_KEY not in added.text
            assert "getUsageLimits" in [op for _, op, _ in sim.services.requests[usage_calls:]]
            async with sdk(url) as client:
                assert "after adding" in await ask(client, "after adding")
            assert sim.requests[-1].headers["tokentype"] == "API_KEY"

            # "refresh" of a key checks it; a revoked key is then marked, a restored one active again
            account_id = added.json()["id"]
            sim.api_keys.discard(API_KEY)
            checked = await admin.post(f"/admin/api/accounts/{account_id}/refresh")
            assert checked.status_code == 400 and "API key" in checked.json()["error"]["message"]
            sim.api_keys.add(API_KEY)
            again = await admin.post(f"/admin/api/accounts/{account_id}/refresh")
            assert again.status_code == 200, again.text
            [account] = (await admin.get("/admin/api/accounts")).json()["accounts"]
            assert account["health"] == "ready"
        assert sim.refresh_calls == 0


# -- profiles ---------------------------------------------------------------------


async def test_an_idc_login_gets_its_profile_at_start_and_sends_it(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim:
        sim.services.profiles = [profile_entry(SIM_IDC_PROFILE_ARN)]
        settings = gateway_settings(sim, tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY)
        async with running_gateway(settings) as url, sdk(url) as client, admin_client(url) as admin:
            assert "profiled" in await ask(client, "profiled")
            [account] = (await admin.get("/admin/api/accounts")).json()["accounts"]
        assert sim.requests[-1].body["profileArn"] == SIM_IDC_PROFILE_ARN
        assert account["profile_arn"] == SIM_IDC_PROFILE_ARN
        assert sim.services.profile_requests  # looked up after the refresh


async def test_a_builder_id_login_has_no_profile_and_sends_none(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim:
        sim.services.profiles = [profile_entry(SIM_IDC_PROFILE_ARN)]
        sim.services.builder_id_accounts = {SIM_REFRESH_TOKEN}
        settings = gateway_settings(sim, tmp_path)
        async with running_gateway(settings) as url, sdk(url) as client:
            assert "no profile" in await ask(client, "no profile")
        assert "profileArn" not in sim.requests[-1].body
        assert (await stored_account(settings, ENV_ACCOUNT_ID)).profile_arn is None


async def test_a_host_that_needs_a_profile_marks_a_profile_less_account_needs_login_saying_so(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim:
        sim.require_profile = True  # and no profile is listed for the login
        settings = gateway_settings(sim, tmp_path)
        async with running_gateway(settings) as url, sdk(url) as client:
            with pytest.raises(anthropic.BadRequestError) as caught:
                await ask(client, "hello")
            assert "profileArn" in caught.value.message
        stored = await stored_account(settings, ENV_ACCOUNT_ID)
        assert stored.status is AccountStatus.NEEDS_LOGIN
        assert "needs a profile" in stored.status_detail and "none" in stored.status_detail


async def test_a_social_login_keeps_the_profile_of_its_refresh_reply(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim:
        sim.require_profile = True
        settings = gateway_settings(sim, tmp_path, auth_method="social")
        async with running_gateway(settings) as url, sdk(url) as client:
            assert "social" in await ask(client, "social")
        assert sim.requests[-1].body["profileArn"] == sim.kiro_profile_arn
        assert sim.services.profile_requests == []  # nothing to ask: the refresh reply carried it
