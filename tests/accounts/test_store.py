from __future__ import annotations

import asyncio
import multiprocessing
import stat
from pathlib import Path

import pytest

from q2api.accounts.records import ENV_ACCOUNT_ID, AccountStatus, EnvAccount
from q2api.accounts.store import SqliteAccountStore
from tests.support.stores import sqlite_store


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def env_account(refresh_token: str = "env-refresh-SECRET-1", **extra: str) -> EnvAccount:
    return EnvAccount(
        auth_method="idc",
        refresh_token=refresh_token,
        client_id=extra.get("client_id", "client-id-1"),
        client_secret=extra.get("client_secret", "client-SECRET"),
        profile_arn=extra.get("profile_arn"),
    )


async def test_directory_and_files_are_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "nested" / "data"
    store = SqliteAccountStore(data_dir)
    await store.seed_from_env(env_account())
    assert mode(data_dir) == 0o700
    assert mode(store.path) == 0o600
    for sidecar in data_dir.glob("*-wal"):
        assert mode(sidecar) == 0o600


async def test_store_uses_wal_mode(tmp_path: Path) -> None:
    import sqlite3

    store = SqliteAccountStore(tmp_path)
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_seeding_creates_the_environment_account(tmp_path: Path) -> None:
    account = await SqliteAccountStore(tmp_path).seed_from_env(env_account())
    assert account.id == ENV_ACCOUNT_ID
    assert account.refresh_token == "env-refresh-SECRET-1"
    assert account.auth_method == "idc" and account.client_id == "client-id-1"
    assert account.status is AccountStatus.ACTIVE


async def test_rotated_token_survives_a_restart_with_the_same_env_token(tmp_path: Path) -> None:
    store = SqliteAccountStore(tmp_path)
    await store.seed_from_env(env_account())
    await store.save_tokens(ENV_ACCOUNT_ID, access_token="access-2", expires_at=2e9, refresh_token="rotated-refresh-2")

    restarted = SqliteAccountStore(tmp_path)  # a new process on the same data dir
    account = await restarted.seed_from_env(env_account())
    assert account.refresh_token == "rotated-refresh-2"
    assert account.access_token == "access-2"


async def test_changed_env_token_replaces_the_stored_one(tmp_path: Path) -> None:
    store = SqliteAccountStore(tmp_path)
    await store.seed_from_env(env_account())
    await store.save_tokens(ENV_ACCOUNT_ID, access_token="access-2", expires_at=2e9, refresh_token="rotated-refresh-2")
    await store.set_status(ENV_ACCOUNT_ID, AccountStatus.NEEDS_LOGIN, "invalid_grant")

    account = await SqliteAccountStore(tmp_path).seed_from_env(env_account("env-refresh-NEW"))
    assert account.refresh_token == "env-refresh-NEW"
    assert account.access_token is None and account.expires_at is None
    assert account.status is AccountStatus.ACTIVE  # a new login clears "needs login"


async def test_client_registration_follows_the_environment(tmp_path: Path) -> None:
    store = SqliteAccountStore(tmp_path)
    await store.seed_from_env(env_account())
    await store.save_tokens(ENV_ACCOUNT_ID, access_token="a", expires_at=2e9, refresh_token="rotated")
    account = await store.seed_from_env(env_account(client_id="client-id-2", client_secret="s2", profile_arn="arn:x"))
    assert (account.client_id, account.client_secret, account.profile_arn) == ("client-id-2", "s2", "arn:x")
    assert account.refresh_token == "rotated"


async def test_save_tokens_keeps_old_refresh_token_when_not_rotated(tmp_path: Path) -> None:
    store = SqliteAccountStore(tmp_path)
    before = await store.seed_from_env(env_account())
    after = await store.save_tokens(ENV_ACCOUNT_ID, access_token="fresh", expires_at=123.0)
    assert after is not None
    assert after.refresh_token == before.refresh_token
    assert after.access_token == "fresh" and after.expires_at == 123.0
    assert after.token_generation == before.token_generation + 1
    assert after.refreshed_at is not None


async def test_add_list_remove(tmp_path: Path) -> None:
    store = SqliteAccountStore(tmp_path)
    added = await store.add(auth_method="social", refresh_token="social-SECRET", label="kiro-main", profile_arn="arn:p")
    await store.add(
        auth_method="idc", refresh_token="idc-SECRET", client_id="cid-0123456789", client_secret="cs-SECRET"
    )
    assert next(account.label for account in await store.accounts()) == "kiro-main"

    views = await store.list_views()
    assert len(views) == 2
    rendered = repr(views) + repr(await store.accounts())
    assert "SECRET" not in rendered
    assert "cid-0123456789" not in rendered  # the client id is shortened too
    assert views[0].has_refresh_token is True

    assert await store.remove(added.id) is True
    assert await store.remove(added.id) is False
    assert len(await store.accounts()) == 1


async def test_add_rejects_idc_without_client(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="client"):
        await SqliteAccountStore(tmp_path).add(auth_method="idc", refresh_token="r")


async def test_add_with_existing_id_replaces_credentials_and_clears_needs_login(tmp_path: Path) -> None:
    store = SqliteAccountStore(tmp_path)
    account = await store.add(auth_method="social", refresh_token="old", account_id="kiro")
    await store.set_status("kiro", AccountStatus.NEEDS_LOGIN, "invalid_grant")
    replaced = await store.add(auth_method="social", refresh_token="new", account_id="kiro")
    assert replaced.refresh_token == "new"
    assert replaced.status is AccountStatus.ACTIVE
    assert replaced.token_generation == account.token_generation + 1


def _hammer(data_dir: str, worker: int, rounds: int) -> None:
    asyncio.run(_hammer_store(data_dir, worker, rounds))


async def _hammer_store(data_dir: str, worker: int, rounds: int) -> None:
    store = SqliteAccountStore(data_dir)
    for round_ in range(rounds):
        await store.seed_from_env(env_account())
        await store.save_tokens(
            ENV_ACCOUNT_ID, access_token=f"a-{worker}-{round_}", expires_at=2e9, refresh_token=f"r-{worker}-{round_}"
        )
        await store.add(auth_method="social", refresh_token=f"x-{worker}-{round_}", account_id=f"w{worker}")
        await store.get(ENV_ACCOUNT_ID)


def test_concurrent_writes_from_two_processes(tmp_path: Path) -> None:
    # Synchronous: the workers are forked, which a running event loop does not survive.
    store = sqlite_store(tmp_path)
    store.seed_from_env(env_account())
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_hammer, args=(str(tmp_path), index, 60)) for index in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [worker.exitcode for worker in workers] == [0, 0]
    final = store.get(ENV_ACCOUNT_ID)
    assert final is not None and final.refresh_token in {"r-0-59", "r-1-59"}
    assert final.token_generation == 120
    assert {account.id for account in store.accounts()} == {ENV_ACCOUNT_ID, "w0", "w1"}


async def test_a_store_of_the_first_release_is_upgraded_in_place(tmp_path: Path) -> None:
    import sqlite3

    with sqlite3.connect(tmp_path / "q2api.sqlite3") as db:  # the first release's table, one switched-off account
        db.execute(
            """CREATE TABLE accounts (id TEXT PRIMARY KEY, label TEXT NOT NULL, auth_method TEXT NOT NULL,
            refresh_token TEXT, client_id TEXT, client_secret TEXT, profile_arn TEXT, access_token TEXT,
            expires_at REAL, status TEXT NOT NULL DEFAULT 'active', status_detail TEXT, seed_fingerprint TEXT,
            token_generation INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, updated_at REAL NOT NULL,
            refreshed_at REAL)"""
        )
        db.execute(
            "INSERT INTO accounts (id, label, auth_method, refresh_token, status, created_at, updated_at) "
            "VALUES ('old', 'old', 'social', 'r', 'disabled', 1, 1)"
        )
    store = SqliteAccountStore(tmp_path)
    [account] = await store.accounts()
    assert (account.enabled, account.status, account.region) == (False, AccountStatus.ACTIVE, None)
    before = await store.generation()
    await store.update("old", enabled=True)
    assert (await store.get("old")).enabled is True and await store.generation() == before + 1


async def test_a_store_whose_table_knows_only_idc_and_social_takes_api_key_accounts_after_the_upgrade(
    tmp_path: Path,
) -> None:
    import sqlite3

    with sqlite3.connect(tmp_path / "q2api.sqlite3") as db:  # the table before Kiro API keys and proxies
        db.execute(
            """CREATE TABLE accounts (id TEXT PRIMARY KEY, label TEXT NOT NULL,
            auth_method TEXT NOT NULL CHECK (auth_method IN ('idc', 'social')),
            refresh_token TEXT, client_id TEXT, client_secret TEXT, profile_arn TEXT, access_token TEXT,
            expires_at REAL, status TEXT NOT NULL DEFAULT 'active', status_detail TEXT, seed_fingerprint TEXT,
            token_generation INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, updated_at REAL NOT NULL,
            refreshed_at REAL, enabled INTEGER NOT NULL DEFAULT 1, region TEXT)"""
        )
        db.execute(
            "INSERT INTO accounts (id, label, auth_method, refresh_token, created_at, updated_at, region) "
            "VALUES ('old', 'old', 'social', 'r', 1, 1, 'eu-west-1')"
        )
        with pytest.raises(sqlite3.IntegrityError):  # what the old CHECK did to an API key
            db.execute(
                "INSERT INTO accounts (id, label, auth_method, created_at, updated_at) VALUES ('k', 'k', 'api_key', 1, 1)"
            )
    store = SqliteAccountStore(tmp_path)
    [old] = await store.accounts()
    assert (old.id, old.refresh_token, old.region, old.proxy_url) == ("old", "r", "eu-west-1", None)
    key = await store.add(
        auth_method="api_key", refresh_token=None, access_token="ksk_SECRET", label="ci", proxy_url="http://p:3128"
    )
    assert (key.auth_method, key.access_token, key.refresh_token, key.proxy_url) == (
        "api_key",
        "ksk_SECRET",
        None,
        "http://p:3128",
    )
    SqliteAccountStore(tmp_path)  # opening again (another worker) finds nothing left to upgrade
    assert {account.id for account in await store.accounts()} == {"old", key.id}
