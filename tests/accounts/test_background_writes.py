"""`BackgroundWrites`: a verified account the store could not take is written once the store works
again, held by its owner (the admin surface) while it waits, and named in the log if the gateway
stops first — never dropped silently. The real SQLite store, behind a switch that makes it fail."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from q2api.accounts.onboarding import BackgroundWrites, NewAccount
from q2api.accounts.refresh import RefreshedToken
from q2api.accounts.store import SqliteAccountStore
from q2api.store.errors import StoreUnavailable
from tests.support.gateway_harness import capture_logs

pytestmark = pytest.mark.asyncio

NEW = NewAccount(label="second", refresh_token="the-operator's-token")
VERIFIED = RefreshedToken(access_token="access", expires_at=4e9, refresh_token="rotated", profile_arn=None)


class SwitchedStore:
    """The real store, failing as an unreachable one does while `down` is set."""

    def __init__(self, store: SqliteAccountStore) -> None:
        self.store = store
        self.down = True

    async def accounts(self) -> Any:
        if self.down:
            raise StoreUnavailable("the store is down")
        return await self.store.accounts()

    async def add(self, **fields: Any) -> Any:
        return await self.store.add(**fields)


async def test_the_account_is_stored_once_the_store_works_again(tmp_path: Path):
    store = SwitchedStore(SqliteAccountStore(tmp_path))
    writes = BackgroundWrites()
    with capture_logs() as logs:
        writes.store(store, NEW, VERIFIED)  # type: ignore[arg-type]
        await asyncio.sleep(0.2)
        assert len(writes) == 1  # held while it waits: the loop alone would keep only a weak reference
        store.down = False
        for _ in range(100):  # the next try comes within a second (exponential wait from 1 s)
            if not len(writes):
                break
            await asyncio.sleep(0.05)
    [account] = await store.store.accounts()
    assert (account.label, account.refresh_token) == ("second", "rotated")  # the rotated token, kept
    assert any("stored the verified account" in line.message for line in logs.lines)
    await writes.close()


async def test_a_gateway_that_stops_first_names_each_account_left_unstored(tmp_path: Path):
    store = SwitchedStore(SqliteAccountStore(tmp_path))
    writes = BackgroundWrites()
    with capture_logs() as logs:
        writes.store(store, NEW, VERIFIED)  # type: ignore[arg-type]
        await asyncio.sleep(0.1)
        await writes.close()
    assert len(writes) == 0
    [line] = [line for line in logs.lines if line.level == "ERROR"]
    assert "add it again" in line.message and line.extra["account"] == "second"
    assert "rotated" not in logs.text and "the-operator's-token" not in logs.text  # no secret in the log
