"""The reloader under faults: a row sealed with another key, ticks that crash, a loop that ends.

Before: one undecryptable row raised out of the background task, which died
without a word, and every worker kept serving the accounts it had (a disabled
account kept serving).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from q2api.accounts import reload, shared_schema
from q2api.accounts.opening import open_account_store
from q2api.accounts.pool import AccountPool
from q2api.accounts.records import Account
from q2api.accounts.reload import AccountReloader
from q2api.accounts.store import SqliteAccountStore
from q2api.accounts.store_protocol import AccountStore
from q2api.accounts.tokens import TokenManager
from q2api.server.readiness import readiness
from tests.support.databases import SHARED_KINDS, TEST_SECRET_KEY, run_sql, scratch_database_url
from tests.support.gateway_harness import capture_logs

TICK = 0.01


async def _never_refresh(account: Account):  # pragma: no cover - nothing here refreshes
    raise AssertionError("no refresh expected")


def worker(store: AccountStore) -> tuple[AccountPool, AccountReloader]:
    pool = AccountPool([], factory=lambda account: TokenManager(account, store, _never_refresh))
    return pool, AccountReloader(store, pool, interval=TICK)


def serving(pool: AccountPool) -> list[str]:
    return sorted(manager.label for manager in pool.managers())


async def eventually(predicate, timeout: float = 10.0) -> bool:
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


def seal_with_another_key(database_url: str, account_id: str) -> None:
    other = Fernet(Fernet.generate_key()).encrypt(b"a refresh token").decode()
    table = shared_schema.accounts
    statement = sa.update(table).where(table.c.id == account_id).values(refresh_token=other)
    run_sql(database_url, lambda db: db.execute(statement))


@pytest.mark.parametrize("kind", SHARED_KINDS)
async def test_a_row_sealed_with_another_key_is_skipped_once_and_the_rest_keeps_following_the_store(kind) -> None:
    with scratch_database_url(kind) as database_url:
        store = await open_account_store(database_url, "unused", TEST_SECRET_KEY)
        try:
            good = await store.add(auth_method="social", refresh_token="r-good", label="good")
            bad = await store.add(auth_method="social", refresh_token="r-bad", label="bad")
            seal_with_another_key(database_url, bad.id)
            pool, reloader = worker(store)
            with capture_logs() as logs:
                reloader.start()
                try:
                    assert await eventually(lambda: serving(pool) == ["good"])
                    await store.update(good.id, enabled=False)  # another process disables it
                    assert await eventually(lambda: serving(pool) == [])  # not served stale
                    await store.add(auth_method="social", refresh_token="r-new", label="newcomer")
                    assert await eventually(lambda: serving(pool) == ["newcomer"])
                    assert reloader.failure is None
                    assert await readiness(store, pool, reloader) is None
                finally:
                    await reloader.stop()
            skipped = [line for line in logs.lines if "is skipped" in line.message]
            assert len(skipped) == 1, [line.message for line in skipped]  # once per row, not every tick
            assert bad.id in skipped[0].message and "Q2API_SECRET_KEY" in skipped[0].message
            assert "r-bad" not in logs.text and "r-good" not in logs.text
        finally:
            await store.close()


async def test_a_tick_that_crashes_is_logged_and_retried_and_readyz_says_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(reload, "MAX_RETRY_DELAY", 0.05)
    store = SqliteAccountStore(tmp_path)
    await store.add(auth_method="social", refresh_token="r1", label="one")
    pool, reloader = worker(store)
    await reloader.tick()
    real_generation = store.generation
    broken = True

    async def generation() -> int:
        if broken:
            raise RuntimeError("a bug in the store")
        return await real_generation()

    monkeypatch.setattr(store, "generation", generation)
    with capture_logs() as logs:
        reloader.start()
        try:
            assert await eventually(lambda: reloader.failure is not None)
            reason = await readiness(store, pool, reloader)
            assert reason is not None and "RuntimeError" in reason
            await asyncio.sleep(0.3)  # several failed ticks
            broken = False
            assert await eventually(lambda: reloader.failure is None)
            assert await readiness(store, pool, reloader) is None
        finally:
            await reloader.stop()
    failures = [line for line in logs.lines if "account reload failed" in line.message]
    assert failures and all("a bug in the store" in line.message for line in failures)
    assert logs.text.count("Traceback") == 1  # the first crash with its traceback, the repeats one line each
    assert any("account reload works again" in line.message for line in logs.lines)


class _LoopKiller(BaseException):
    """Something no `except Exception` catches."""


async def test_a_reloader_loop_that_ends_is_logged_and_started_again(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(reload, "MAX_RETRY_DELAY", 0.05)
    store = SqliteAccountStore(tmp_path)
    pool, reloader = worker(store)
    real_tick = reloader.tick
    killed = []

    async def tick(*, force: bool = False) -> None:
        if not killed:
            killed.append(1)
            raise _LoopKiller
        await real_tick(force=force)

    monkeypatch.setattr(reloader, "tick", tick)
    with capture_logs() as logs:
        reloader.start()
        try:
            assert await eventually(lambda: bool(killed))
            await store.add(auth_method="social", refresh_token="r1", label="after the restart")
            assert await eventually(lambda: serving(pool) == ["after the restart"])
            assert reloader.failure is None
        finally:
            await reloader.stop()
    assert any("the account reloader stopped; starting it again" in line.message for line in logs.lines)
