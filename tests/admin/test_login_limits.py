"""Pending device logins are capped per worker, and one can be cancelled (`DELETE /admin/api/logins/{id}`).

Before: every `POST /admin/api/logins` registered a client and started a task that polled until its
code expired (ten minutes), without a bound and without a way to stop it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from q2api.accounts.records import LoginStatus
from q2api.accounts.sql_logins import SqlLogins
from q2api.accounts.store import SqliteAccountStore
from q2api.admin import logins
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import ADMIN_KEY, Gateway, open_gateway


@pytest.fixture
async def admin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Gateway, httpx2.AsyncClient]]:
    monkeypatch.setattr(logins, "CANCEL_CHECK_INTERVAL", 0.05)
    async with open_gateway(tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY) as gateway:
        gateway.sim.device.interval = 0.01
        gateway.sim.device.answers.clear()
        gateway.sim.device.answers.extend(["authorization_pending"] * 100_000)  # nobody approves
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        async with httpx2.AsyncClient(base_url=gateway.base_url, headers=headers, timeout=20) as http:
            yield gateway, http


def polls(sim: SimulatedUpstream) -> int:
    return len(sim.device.polls)


async def start(http: httpx2.AsyncClient, label: str) -> httpx2.Response:
    return await http.post("/admin/api/logins", json={"label": label, "method": "builder-id"})


async def test_pending_logins_beyond_the_cap_are_429_and_a_cancelled_one_frees_a_place(admin) -> None:
    gateway, http = admin
    started = [await start(http, f"user-{n}") for n in range(logins.MAX_PENDING_LOGINS)]
    assert [reply.status_code for reply in started] == [201] * logins.MAX_PENDING_LOGINS
    registrations = len(gateway.sim.device.clients)

    refused = await start(http, "one-too-many")
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["type"] == "too_many_logins"
    assert len(gateway.sim.device.clients) == registrations  # refused before registering a client

    first = started[0].json()["login_id"]
    assert (await http.delete(f"/admin/api/logins/{first}")).status_code == 204
    assert (await http.get(f"/admin/api/logins/{first}")).json()["status"] == "cancelled"
    assert (await start(http, "now-there-is-room")).status_code == 201


async def test_a_cancelled_login_stops_polling_and_cannot_be_cancelled_twice(admin) -> None:
    gateway, http = admin
    login_id = (await start(http, "someone")).json()["login_id"]
    assert await gateway.sim.wait_until(lambda: polls(gateway.sim) > 2)
    assert (await http.delete(f"/admin/api/logins/{login_id}")).status_code == 204
    await asyncio.sleep(0.2)
    after = polls(gateway.sim)
    await asyncio.sleep(0.3)
    assert polls(gateway.sim) == after  # no more polling
    again = await http.delete(f"/admin/api/logins/{login_id}")
    assert again.status_code == 409 and again.json()["error"]["type"] == "login_not_pending"
    assert (await http.delete("/admin/api/logins/login_nope")).status_code == 404


async def test_a_login_cancelled_through_the_store_stops_on_the_worker_that_runs_it(admin) -> None:
    gateway, http = admin
    login_id = (await start(http, "elsewhere")).json()["login_id"]
    assert await gateway.sim.wait_until(lambda: polls(gateway.sim) > 2)
    # As another worker's DELETE does: only the record changes.
    await SqliteAccountStore(gateway.settings.data_dir).finish_login(login_id, LoginStatus.CANCELLED, detail="x")
    await asyncio.sleep(0.4)
    after = polls(gateway.sim)
    await asyncio.sleep(0.3)
    assert polls(gateway.sim) == after


async def test_a_login_that_ends_while_it_is_being_cancelled_keeps_its_done(admin, monkeypatch) -> None:
    """The cancel read the login pending, then the user approved it and its account was stored: the
    cancel must not overwrite that `done` with `cancelled` (it answers 409, naming what the login is)."""
    _gateway, http = admin
    login_id = (await start(http, "racing")).json()["login_id"]
    monkeypatch.setattr(logins, "CANCEL_CHECK_INTERVAL", 60.0)  # the worker's own checks stay out of the way
    await asyncio.sleep(0.2)
    real_read = SqlLogins.read_login
    approved: list[str] = []

    async def read_then_approved(self, wanted):
        record = await real_read(self, wanted)
        if wanted == login_id and not approved:  # approved right after the cancel's read
            await self.finish_login(wanted, LoginStatus.DONE, account_id="acc-approved")
            approved.append(wanted)
        return record

    monkeypatch.setattr(SqlLogins, "read_login", read_then_approved)
    reply = await http.delete(f"/admin/api/logins/{login_id}")
    assert approved == [login_id]
    assert reply.status_code == 409 and reply.json()["error"]["message"].endswith("is done, not pending")
    assert (await http.get(f"/admin/api/logins/{login_id}")).json()["status"] == "done"
