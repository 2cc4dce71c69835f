"""What only the shared store does: encryption at rest, migrations under a lock, locks that die with a replica."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from q2api.accounts import shared_schema
from q2api.accounts.database_url import mask_database_url, parse_database_url
from q2api.accounts.opening import open_account_store, opened_account_store
from q2api.accounts.secret_box import SecretKeyMismatch
from q2api.accounts.shared_schema import SchemaTooNew
from q2api.accounts.store_protocol import AccountStore
from tests.support.databases import SHARED_KINDS, TEST_SECRET_KEY, raw_rows, run_sql, scratch_database_url


@pytest.fixture(params=SHARED_KINDS)
def database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    with scratch_database_url(request.param) as url:
        yield url


async def add_secret_account(store: AccountStore) -> None:
    await store.add(
        auth_method="idc",
        refresh_token="refresh-SECRET-1",
        client_id="cid",
        client_secret="client-SECRET-1",
        access_token="access-SECRET-1",
        label="work",
    )


async def test_secrets_are_encrypted_at_rest(database_url: str, tmp_path) -> None:
    store = await open_account_store(database_url, tmp_path, TEST_SECRET_KEY)
    await add_secret_account(store)
    await store.close()
    (row,) = raw_rows(database_url, shared_schema.accounts)
    assert "SECRET" not in repr(tuple(row))
    assert row.client_id == "cid" and row.label == "work"  # not secrets: kept readable for operators


async def test_another_key_cannot_read_the_secrets_but_a_rotated_key_list_can(database_url: str, tmp_path) -> None:
    async with opened_account_store(database_url, tmp_path, TEST_SECRET_KEY) as store:
        await add_secret_account(store)
    with pytest.raises(SecretKeyMismatch, match="Q2API_SECRET_KEY"):
        async with opened_account_store(database_url, tmp_path, Fernet.generate_key().decode()) as other_key:
            await other_key.accounts()
    rotated = f"{Fernet.generate_key().decode()},{TEST_SECRET_KEY}"  # new key first, old one still listed
    async with opened_account_store(database_url, tmp_path, rotated) as store:
        (account,) = await store.accounts()
    assert account.refresh_token == "refresh-SECRET-1"


async def test_a_shared_store_without_a_key_is_refused(database_url: str, tmp_path) -> None:
    with pytest.raises(ValueError, match="Q2API_SECRET_KEY"):
        await open_account_store(database_url, tmp_path, None)


def test_replicas_starting_together_migrate_once(database_url: str, tmp_path) -> None:
    failures: list[BaseException] = []
    start = threading.Barrier(4)

    async def open_and_close() -> None:
        async with opened_account_store(database_url, tmp_path, TEST_SECRET_KEY):
            pass

    def start_replica() -> None:  # a thread and an event loop each, as separate processes would have
        start.wait()
        try:
            asyncio.run(open_and_close())
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=start_replica) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    versions = sorted(row.version for row in raw_rows(database_url, shared_schema.schema_migrations))
    assert versions == [migration.version for migration in shared_schema.MIGRATIONS]
    assert len(raw_rows(database_url, shared_schema.meta)) == 1  # the generation row, seeded once


async def test_a_store_migrated_by_a_newer_q2api_is_refused(database_url: str, tmp_path) -> None:
    await (await open_account_store(database_url, tmp_path, TEST_SECRET_KEY)).close()
    future = sa.insert(shared_schema.schema_migrations).values(version=999, description="future", applied_at=0.0)
    run_sql(database_url, lambda connection: connection.execute(future))
    with pytest.raises(SchemaTooNew, match="999"):
        await open_account_store(database_url, tmp_path, TEST_SECRET_KEY)


_HOLD_THE_LOCK = """
import asyncio, sys
from q2api.accounts.opening import open_account_store

async def main():
    store = await open_account_store(sys.argv[1], sys.argv[2], sys.argv[3])
    async with store.refresh_lock("acc-1"):
        print("held", flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


async def test_a_replica_killed_while_refreshing_blocks_nobody(database_url: str, tmp_path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_THE_LOCK, database_url, str(tmp_path), TEST_SECRET_KEY],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        store = await open_account_store(database_url, tmp_path, TEST_SECRET_KEY)
        with pytest.raises(TimeoutError):  # really held: we wait
            async with asyncio.timeout(0.5), store.refresh_lock("acc-1"):
                pass
        holder.kill()  # SIGKILL: no release, no goodbye; the database sees the connection end
        holder.wait()
        started = time.monotonic()
        async with asyncio.timeout(10), store.refresh_lock("acc-1"):
            pass
        assert time.monotonic() - started < 10
        await store.close()
    finally:
        holder.kill()
        holder.wait()


async def test_a_write_whose_caller_is_cancelled_still_commits(database_url: str, tmp_path) -> None:
    # A client that hangs up, or a shutdown, must not lose a rotated refresh token half-written.
    async with opened_account_store(database_url, tmp_path, TEST_SECRET_KEY) as store:
        account = await store.add(auth_method="social", refresh_token="refresh-SECRET-1", label="work")
        saving = asyncio.create_task(
            store.save_tokens(account.id, access_token="a2", expires_at=2e9, refresh_token="rotated-SECRET")
        )
        await asyncio.sleep(0)  # the write has begun
        saving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await saving
    async with opened_account_store(database_url, tmp_path, TEST_SECRET_KEY) as store:
        stored = await store.get(account.id)
    assert stored is not None and stored.refresh_token == "rotated-SECRET"


def test_the_location_and_every_message_hide_the_password() -> None:
    url = "postgresql://q2api:s3cret-PASS@db.internal:5432/q2api"
    assert "s3cret" not in mask_database_url(url) and "db.internal" in mask_database_url(url)
    assert "s3cret" not in repr(parse_database_url(url))
    assert "s3cret" not in mask_database_url("postgresql://q2api:s3cret-PASS@[bad")
    with pytest.raises(ValueError) as refused:
        parse_database_url("oracle://u:s3cret-PASS@h/db")
    assert "s3cret" not in str(refused.value)


async def test_an_api_key_and_a_proxy_are_encrypted_at_rest(database_url: str, tmp_path) -> None:
    async with opened_account_store(database_url, tmp_path, TEST_SECRET_KEY) as store:
        await store.add(
            auth_method="api_key",
            refresh_token=None,
            access_token="ksk_SECRET-1",
            label="ci",
            proxy_url="socks5://me:proxy-SECRET@10.0.0.9:1080",
        )
    (row,) = raw_rows(database_url, shared_schema.accounts)
    assert "SECRET" not in repr(tuple(row)) and "10.0.0.9" not in str(row.proxy_url)
    assert row.auth_method == "api_key"


async def test_a_store_from_before_account_proxies_gains_the_column(database_url: str, tmp_path) -> None:
    async with opened_account_store(database_url, tmp_path, TEST_SECRET_KEY) as store:
        await add_secret_account(store)

    async def back_to_version_4(connection) -> None:
        await connection.execute(sa.text("ALTER TABLE q2api_accounts DROP COLUMN proxy_url"))
        await connection.execute(
            sa.delete(shared_schema.schema_migrations).where(shared_schema.schema_migrations.c.version == 5)
        )

    run_sql(database_url, back_to_version_4)
    async with opened_account_store(database_url, tmp_path, TEST_SECRET_KEY) as store:
        (account,) = await store.accounts()
        assert account.proxy_url is None and account.refresh_token == "refresh-SECRET-1"
        await store.add(auth_method="social", refresh_token="r", label="proxied", proxy_url="http://p:3128")
        assert {a.label: a.proxy_url for a in await store.accounts()} == {"work": None, "proxied": "http://p:3128"}
