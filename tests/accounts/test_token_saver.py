"""A rotated refresh token is never lost when the store cannot save it.

The token service retires the old refresh token the moment it issues a new one.
Here the SQLite file is held locked by another connection (as another process
would) for longer than the busy timeout: the refresh must still serve, keep the
new pair in memory, refresh again from it, say so at ERROR without a secret, and
write it once the lock is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from q2api.accounts.records import ENV_ACCOUNT_ID, EnvAccount
from q2api.accounts.refresh import RefreshedToken, RefreshEndpoints, refresh_access_token
from q2api.accounts.store import SqliteAccountStore
from q2api.accounts.token_saver import TokenSaver
from q2api.accounts.tokens import TokenManager
from q2api.store.sqlite_database import DB_FILENAME
from q2api.testing.simulated_upstream import SIM_CLIENT_ID, SIM_CLIENT_SECRET, SIM_REFRESH_TOKEN, SimulatedUpstream
from tests.support.gateway_harness import capture_logs, find_secrets


@pytest.fixture
async def sim() -> AsyncIterator[SimulatedUpstream]:
    async with SimulatedUpstream(check_tokens=True, rotate_refresh_tokens=True) as simulator:
        simulator.valid_refresh_tokens = {SIM_REFRESH_TOKEN}
        yield simulator


@contextlib.contextmanager
def locked(data_dir: Path) -> Iterator[None]:
    """Another connection holds the write lock (what another process mid-write, or a stuck one, does)."""
    db = sqlite3.connect(data_dir / DB_FILENAME, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()


async def seeded_store(data_dir: Path) -> SqliteAccountStore:
    store = SqliteAccountStore(data_dir, busy_timeout=0.1)
    await store.seed_from_env(
        EnvAccount(
            auth_method="idc", refresh_token=SIM_REFRESH_TOKEN, client_id=SIM_CLIENT_ID, client_secret=SIM_CLIENT_SECRET
        )
    )
    return store


async def wait_until(condition, timeout: float = 15.0) -> None:
    """Until `condition()` holds (`condition` returns a bool, or is a coroutine function answering one)."""
    deadline = time.monotonic() + timeout
    while not await _holds(condition()):
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def _holds(answer) -> bool:
    return await answer if inspect.isawaitable(answer) else answer


async def stored_refresh_token(store: SqliteAccountStore) -> str | None:
    return (await store.get(ENV_ACCOUNT_ID)).refresh_token


async def test_a_rotated_token_survives_a_locked_store_and_is_written_later(tmp_path, sim) -> None:
    store = await seeded_store(tmp_path)
    async with aiohttp.ClientSession() as session:
        endpoints = RefreshEndpoints(oidc=sim.oidc_url, kiro=sim.kiro_refresh_url)
        account = await store.get(ENV_ACCOUNT_ID)
        manager = TokenManager(account, store, functools.partial(refresh_access_token, session, endpoints=endpoints))
        with capture_logs() as logs, locked(tmp_path):
            first = await manager.access_token()  # served, not an OperationalError
            assert first in sim.valid_access_tokens
            (rotated,) = sim.valid_refresh_tokens
            assert await stored_refresh_token(store) == SIM_REFRESH_TOKEN  # the store could not take it
            # The access token is rejected: the next refresh must spend the rotated token, held in memory.
            second = await manager.refresh_after_rejection(first)
            assert second != first and second in sim.valid_access_tokens
            assert sim.refresh_requests[-1].body["refreshToken"] == rotated
        errors = [line.message for line in logs.lines if line.level == "ERROR"]
        assert any("could not save the refreshed tokens" in message for message in errors), errors
        assert find_secrets(logs.text) == []
        assert not manager.needs_login
        # The lock is gone: the background retry writes the newest pair.
        (newest,) = sim.valid_refresh_tokens

        async def newest_is_stored() -> bool:
            return await stored_refresh_token(store) == newest

        await wait_until(newest_is_stored)
        assert (await store.get(ENV_ACCOUNT_ID)).access_token == second


async def test_a_late_write_never_undoes_a_new_login(tmp_path) -> None:
    store = await seeded_store(tmp_path)
    saver = TokenSaver(store, ENV_ACCOUNT_ID, "environment", first_retry_delay=0.05)
    stored = await store.get(ENV_ACCOUNT_ID)
    tokens = RefreshedToken(access_token="a-1", expires_at=time.time() + 3600, refresh_token="r-1", profile_arn=None)
    with locked(tmp_path):
        in_memory = await saver.save(stored, tokens)
        assert in_memory.refresh_token == "r-1" and saver.has_unsaved
        assert saver.overlay(stored).refresh_token == "r-1"
    # The operator stores a new login before the retry gets through: the login wins.
    await store.seed_from_env(EnvAccount(auth_method="social", refresh_token="new-login"))
    await wait_until(lambda: not saver.has_unsaved)
    assert await stored_refresh_token(store) == "new-login"
    assert saver.overlay(await store.get(ENV_ACCOUNT_ID)).refresh_token == "new-login"
