"""The gateway keeps serving while its account store fails to save (a full disk, a locked file)."""

from __future__ import annotations

import asyncio
import sqlite3

from q2api.accounts.records import ENV_ACCOUNT_ID
from q2api.accounts.store import SqlAccountStore, SqliteAccountStore
from q2api.testing.simulated_upstream import SIM_REFRESH_TOKEN, SimulatedUpstream
from tests.support.gateway_harness import ask, capture_logs, find_secrets, gateway, sdk


async def test_a_full_disk_at_refresh_time_serves_the_client_and_keeps_the_rotated_token(tmp_path, monkeypatch) -> None:
    real_save = SqlAccountStore.save_tokens
    disk_full = True

    async def save_tokens(self, *args, **kwargs):
        if disk_full:
            raise sqlite3.OperationalError("database or disk is full")
        return await real_save(self, *args, **kwargs)

    monkeypatch.setattr(SqlAccountStore, "save_tokens", save_tokens)  # the store class the gateway uses
    async with SimulatedUpstream(check_tokens=True, rotate_refresh_tokens=True) as sim:
        sim.valid_refresh_tokens = {SIM_REFRESH_TOKEN}
        with capture_logs() as logs:
            async with gateway(sim, tmp_path) as url:
                client = sdk(url)
                assert "first" in await ask(client, "first")
                sim.revoke_access_tokens()  # the next request needs a refresh from the unsaved, rotated token
                assert "second" in await ask(client, "second", stream=True)
                assert sim.refresh_requests[-1].body["refreshToken"] != SIM_REFRESH_TOKEN
                disk_full = False
                (newest,) = sim.valid_refresh_tokens
                for _ in range(300):  # the background retry, within seconds
                    if (await SqliteAccountStore(tmp_path).get(ENV_ACCOUNT_ID)).refresh_token == newest:
                        break
                    await asyncio.sleep(0.05)
                assert (await SqliteAccountStore(tmp_path).get(ENV_ACCOUNT_ID)).refresh_token == newest
        assert [line.extra["status"] for line in logs.request_lines()] == [200, 200]
        assert any("could not save the refreshed tokens" in line.message for line in logs.lines)
        assert find_secrets(logs.text) == []
