"""What only a shared store does: encryption at rest, a key to open it, locks that die with a replica.

What every store does, the shared ones included (migrating once, refusing a newer schema, cancelled
writes that still commit), is in test_store_contract.py.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from q2api.accounts import store_schema
from q2api.accounts.opening import open_account_store, opened_account_store
from q2api.accounts.store_protocol import AccountStore
from q2api.store.database_url import mask_database_url, parse_database_url
from q2api.store.secret_box import SecretKeyMismatch
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
    (row,) = raw_rows(database_url, store_schema.accounts)
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
    (row,) = raw_rows(database_url, store_schema.accounts)
    assert "SECRET" not in repr(tuple(row)) and "10.0.0.9" not in str(row.proxy_url)
    assert row.auth_method == "api_key"


async def test_a_store_from_before_account_proxies_gains_the_column(database_url: str, tmp_path) -> None:
    async with opened_account_store(database_url, tmp_path, TEST_SECRET_KEY) as store:
        await add_secret_account(store)

    bookkeeping = store_schema.STORE_MIGRATIONS.bookkeeping

    async def back_to_version_5(connection) -> None:
        await connection.execute(sa.text("ALTER TABLE q2api_accounts DROP COLUMN proxy_url"))
        await connection.execute(sa.delete(bookkeeping).where(bookkeeping.c.version == 6))

    run_sql(database_url, back_to_version_5)
    async with opened_account_store(database_url, tmp_path, TEST_SECRET_KEY) as store:
        (account,) = await store.accounts()
        assert account.proxy_url is None and account.refresh_token == "refresh-SECRET-1"
        await store.add(auth_method="social", refresh_token="r", label="proxied", proxy_url="http://p:3128")
        assert {a.label: a.proxy_url for a in await store.accounts()} == {"work": None, "proxied": "http://p:3128"}
