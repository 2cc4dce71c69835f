"""Operating a running gateway: accounts added (admin API, device login), served, disabled, removed.

Two gateways share one store, as `--workers 2` or two replicas would: every
change made through one is followed by the other within seconds. The
simulator's recorded requests say which account served what. Every answer and
every log line is scanned for the secrets.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from q2api.accounts.store import SqliteAccountStore
from q2api.testing import scripts
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import (
    ADMIN_KEY,
    ask,
    capture_logs,
    find_secrets,
    gateway_settings,
    sdk,
)

NEW_REFRESH_TOKEN = "sim-refresh-42"


class Operator:
    """The admin API of one gateway, every answer kept for the secret scan."""

    def __init__(self, base_url: str, answers: list[str]) -> None:
        self.http = httpx2.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=20)
        self.answers = answers

    async def call(self, method: str, path: str, **options: Any) -> httpx2.Response:
        response = await self.http.request(method, path, **options)
        self.answers.append(f"{response.status_code} {response.text}")
        return response

    async def accounts(self) -> dict[str, dict[str, Any]]:
        response = await self.call("GET", "/admin/api/accounts")
        assert response.status_code == 200, response.text
        return {account["id"]: account for account in response.json()["accounts"]}


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "the change never arrived"
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def two_gateways(sim: SimulatedUpstream, data_dir: Path) -> AsyncIterator[tuple[str, str]]:
    settings = gateway_settings(sim, data_dir, Q2API_ADMIN_KEY=ADMIN_KEY)
    async with running_gateway(settings) as first, running_gateway(settings) as second:
        yield first, second


async def tokens_of(data_dir: Path, account_id: str) -> set[str]:
    account = await SqliteAccountStore(data_dir).get(account_id)
    return {account.access_token} if account and account.access_token else set()


@pytest.mark.slow  # waits for reload ticks and device-login polls
async def test_accounts_join_serve_and_leave_without_a_restart(tmp_path: Path) -> None:
    answers: list[str] = []
    async with SimulatedUpstream(check_tokens=True) as sim:
        sim.device.interval = 0.05  # seconds between the device-login polls
        with capture_logs() as logs:
            async with two_gateways(sim, tmp_path) as (first_url, second_url):
                first, second = Operator(first_url, answers), Operator(second_url, answers)
                client_first, client_second = sdk(first_url), sdk(second_url)
                assert "hi" in await ask(client_first, "hi")  # the environment account serves

                # -- gained through the admin API, checked by a real refresh first
                refreshes_before = sim.refresh_calls
                added = await first.call(
                    "POST", "/admin/api/accounts", json={"label": "added", "refresh_token": NEW_REFRESH_TOKEN}
                )
                assert added.status_code == 201, added.text
                assert sim.refresh_calls == refreshes_before + 1
                added_id = added.json()["id"]
                assert added.json()["health"] == "ready" and added.json()["auth_method"] == "social"

                # -- gained through a device login: granted after two authorization_pending polls
                started = await first.call("POST", "/admin/api/logins", json={"label": "device"})
                assert started.status_code == 201, started.text
                login = started.json()
                assert login["user_code"] and login["verification_uri_complete"].endswith(login["user_code"])

                async def login_done() -> bool:
                    status = (await second.call("GET", f"/admin/api/logins/{login['login_id']}")).json()
                    return status["status"] == "done"

                await eventually(login_done)  # answered by the other gateway, from the store
                assert [answer for _, answer in sim.device.polls] == [
                    "authorization_pending",
                    "authorization_pending",
                    "grant",
                ]
                device_id = (await second.call("GET", f"/admin/api/logins/{login['login_id']}")).json()["account_id"]

                # -- the other gateway serves with both new accounts within seconds (its pool, seen by /healthz)
                async def serving(url: str) -> set[str]:
                    health = await second.http.get(url + "/healthz")
                    return {account["id"] for account in health.json()["accounts"]}

                async def both_serving() -> bool:
                    return {added_id, device_id} <= await serving(second_url)

                await eventually(both_serving)
                new_tokens = await tokens_of(tmp_path, added_id) | await tokens_of(tmp_path, device_id)
                served_before = len(sim.requests)
                for _ in range(6):
                    await ask(client_second)
                used = {request.access_token for request in sim.requests[served_before:]}
                assert new_tokens <= used  # least recently used first: every account takes a turn

                # -- disabled: no request reaches it afterwards, from either gateway
                disabled = await first.call("PATCH", f"/admin/api/accounts/{added_id}", json={"enabled": False})
                assert disabled.status_code == 200 and disabled.json()["health"] == "disabled"

                async def disabled_everywhere() -> bool:
                    return added_id not in await serving(second_url)

                await eventually(disabled_everywhere)
                assert (await second.accounts())[added_id]["health"] == "disabled"
                served_before = len(sim.requests)
                for client in (client_first, client_second) * 3:
                    await ask(client)
                late = {request.access_token for request in sim.requests[served_before:]}
                assert late and not (late & await tokens_of(tmp_path, added_id))

                # -- per-account stats, shared by both gateways
                accounts = await second.accounts()
                assert accounts[device_id]["stats"]["requests"] >= 1
                assert accounts[device_id]["stats"]["last_used_at"].endswith("Z")

                # -- removed
                removed = await second.call("DELETE", f"/admin/api/accounts/{added_id}")
                assert removed.status_code == 204
                assert added_id not in await first.accounts()

                # -- not ready once every account is disabled; ready again after
                for account_id in await first.accounts():
                    await first.call("PATCH", f"/admin/api/accounts/{account_id}", json={"enabled": False})

                async def not_ready() -> bool:
                    response = await second.http.get("/readyz")
                    answers.append(response.text)
                    return response.status_code == 503

                await eventually(not_ready)
                reason = (await first.http.get("/readyz")).json()
                assert reason == {"status": "not_ready", "reason": "every account is disabled (2 in the store)"}
                await first.call("PATCH", f"/admin/api/accounts/{device_id}", json={"enabled": True})
                assert (await first.http.get("/readyz")).status_code == 200
                for http in (first.http, second.http):
                    await http.aclose()

    assert find_secrets("\n".join(answers)) == []
    assert find_secrets(logs.text) == []
    audit = [line.extra for line in logs.lines if line.extra.get("actor") == "admin"]
    assert any(entry["action"] == "add account" and entry["account_id"] == added_id for entry in audit)
    assert any(entry["action"] == "disable account" and entry["account_id"] == added_id for entry in audit)
    assert any(entry["action"] == "remove account" and entry["label"] == "added" for entry in audit)


async def test_a_suspended_account_stops_serving_visibly(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim:
        settings = gateway_settings(sim, tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY)
        async with running_gateway(settings) as url:
            operator = Operator(url, [])
            sim.enqueue(scripts.access_denied())
            client = sdk(url)
            with pytest.raises(anthropic.PermissionDeniedError):
                await ask(client)

            health = (await operator.http.get("/healthz")).json()
            assert [account["health"] for account in health["accounts"]] == ["needs_login"]
            ready = await operator.http.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["reason"] == "no account can serve now: 1 needs_login"
            [account] = (await operator.accounts()).values()
            assert account["health"] == "needs_login" and "TEMPORARILY_SUSPENDED" in account["status_detail"]

            reached = len(sim.requests)
            with pytest.raises(anthropic.AuthenticationError):
                await ask(client)
            assert len(sim.requests) == reached  # it serves nothing until an operator acts
            await operator.http.aclose()


async def test_a_request_under_way_keeps_the_account_that_is_disabled_meanwhile(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim:
        settings = gateway_settings(sim, tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY, Q2API_PING_INTERVAL="0.05")
        async with running_gateway(settings) as url:
            operator = Operator(url, [])
            sim.enqueue(scripts.stalled_reply(1.0, text_before="Started", text_after=" and finished"))
            reply = asyncio.create_task(ask(sdk(url), stream=True))
            assert await sim.wait_until(lambda: sim.streams_started == 1)
            disabled = await operator.call("PATCH", "/admin/api/accounts/env", json={"enabled": False})
            assert disabled.status_code == 200
            assert await reply == "Started and finished"
            assert (await operator.http.get("/readyz")).status_code == 503  # nothing new starts with it
            await operator.http.aclose()
