"""Data directories and shared databases written before the one schema are adopted in place, nothing lost.

The fixtures build each store with the DDL of the release before the one schema (copied here
from its `schema.py` and `shared_schema.py`, not generated from today's tables), fill every
table, and open it with today's store.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from q2api.accounts import store_schema
from q2api.accounts.opening import open_account_store
from q2api.accounts.records import AccountStatus, LoginStatus
from q2api.accounts.store import SqliteAccountStore
from q2api.store.errors import StoreUnavailable
from q2api.store.secret_box import SecretBox
from q2api.store.sqlite_database import DB_FILENAME
from q2api.stored_responses.sql_store import SqlResponseStore
from tests.support.databases import SHARED_KINDS, TEST_SECRET_KEY, raw_rows, run_sql, scratch_database_url

# -- the SQLite file of the two-schema releases (their schema.py, verbatim) -----------------------

OLD_SQLITE_DDL = (
    """
    CREATE TABLE IF NOT EXISTS accounts (
        id                TEXT PRIMARY KEY,
        label             TEXT NOT NULL,
        auth_method       TEXT NOT NULL CHECK (auth_method IN ('idc', 'social')),
        refresh_token     TEXT,
        client_id         TEXT,
        client_secret     TEXT,
        profile_arn       TEXT,
        access_token      TEXT,
        expires_at        REAL,
        status            TEXT NOT NULL DEFAULT 'active',
        status_detail     TEXT,
        seed_fingerprint  TEXT,
        token_generation  INTEGER NOT NULL DEFAULT 0,
        created_at        REAL NOT NULL,
        updated_at        REAL NOT NULL,
        refreshed_at      REAL,
        enabled           INTEGER NOT NULL DEFAULT 1,
        region            TEXT
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS store_meta (
        key    TEXT PRIMARY KEY,
        value  INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS account_stats (
        account_id    TEXT PRIMARY KEY,
        requests      INTEGER NOT NULL DEFAULT 0,
        failures      INTEGER NOT NULL DEFAULT 0,
        last_error    TEXT,
        last_used_at  REAL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS logins (
        id          TEXT PRIMARY KEY,
        label       TEXT NOT NULL,
        method      TEXT NOT NULL,
        status      TEXT NOT NULL,
        account_id  TEXT,
        detail      TEXT,
        expires_at  REAL NOT NULL,
        created_at  REAL NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS account_rests (
        account_id  TEXT PRIMARY KEY,
        until       REAL NOT NULL,
        reason      TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS responses (
        id                    TEXT PRIMARY KEY,
        owner                 TEXT NOT NULL,
        previous_response_id  TEXT,
        created_at            REAL NOT NULL,
        expires_at            REAL NOT NULL,
        model                 TEXT NOT NULL,
        record                TEXT NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS responses_expiry ON responses (expires_at)",
)
FUTURE = time.time() + 3600
RECORD = '{"input_items": [{"id": "in_1"}], "response": {"id": "resp_1", "output": []}}'


def old_sqlite_store(data_dir: Path) -> None:
    """A data directory as the two-schema releases left it: two accounts, stats, a rest, a login, a response."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    with sqlite3.connect(data_dir / DB_FILENAME) as db:
        db.execute("PRAGMA journal_mode=WAL")
        for statement in OLD_SQLITE_DDL:
            db.execute(statement)
        db.execute(
            "INSERT INTO accounts (id, label, auth_method, refresh_token, client_id, client_secret, profile_arn, "
            "access_token, expires_at, status, status_detail, seed_fingerprint, token_generation, created_at, "
            "updated_at, refreshed_at, enabled, region) VALUES "
            "('env', 'environment', 'idc', 'rotated-SECRET', 'cid', 'client-SECRET', 'arn:p', 'access-1', 2e9, "
            "'needs_login', 'refresh token rejected', 'fp', 7, 1, 2, 3, 0, 'eu-west-1'), "
            "('kiro', 'kiro', 'social', 'kiro-SECRET', NULL, NULL, NULL, NULL, NULL, 'active', NULL, NULL, 0, 5, 5, "
            "NULL, 1, NULL)"
        )
        db.execute("INSERT INTO store_meta (key, value) VALUES ('generation', 41)")
        db.execute("INSERT INTO account_stats VALUES ('env', 12, 3, 'throttled', 100.0)")
        db.execute("INSERT INTO account_rests VALUES ('kiro', ?, 'quota_exhausted')", (FUTURE,))
        db.execute("INSERT INTO logins VALUES ('login_1', 'work', 'idc', 'done', 'kiro', NULL, ?, ?)", (FUTURE, 1.0))
        db.execute(
            "INSERT INTO responses VALUES ('resp_1', 'owner', NULL, 1.0, ?, 'claude-sonnet-5-5', ?)", (FUTURE, RECORD)
        )


async def test_a_sqlite_store_of_the_two_schema_releases_is_adopted_whole(tmp_path: Path) -> None:
    old_sqlite_store(tmp_path)
    store = await open_account_store(None, tmp_path, None)
    env, kiro = await store.accounts()
    assert (env.id, env.refresh_token, env.client_secret, env.access_token) == (
        "env",
        "rotated-SECRET",
        "client-SECRET",
        "access-1",
    )
    assert (env.status, env.status_detail, env.enabled, env.region) == (
        AccountStatus.NEEDS_LOGIN,
        "refresh token rejected",
        False,
        "eu-west-1",
    )
    assert (env.token_generation, env.created_at, env.updated_at, env.refreshed_at) == (7, 1, 2, 3)
    assert (kiro.id, kiro.auth_method, kiro.refresh_token, kiro.enabled) == ("kiro", "social", "kiro-SECRET", True)
    assert await store.generation() == 41
    stats = (await store.read_stats())["env"]
    assert (stats.requests, stats.failures, stats.last_error, stats.last_used_at) == (12, 3, "throttled", 100.0)
    assert (await store.read_rests())["kiro"].reason == "quota_exhausted"
    login = await store.read_login("login_1")
    assert login is not None and (login.status, login.account_id) == (LoginStatus.DONE, "kiro")
    response = await SqlResponseStore(store.database).get("resp_1", "owner")
    assert response is not None and response.input_items == [{"id": "in_1"}]

    with sqlite3.connect(tmp_path / DB_FILENAME) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not tables & {"accounts", "store_meta", "account_stats", "logins", "account_rests", "responses"}
    # The environment seed still recognises its own token: the rotated one is kept.
    again = SqliteAccountStore(tmp_path)  # a second opening migrates nothing more
    assert [account.id for account in await again.accounts()] == ["env", "kiro"]


async def test_an_adopted_sqlite_store_goes_on_with_its_generation(tmp_path: Path) -> None:
    old_sqlite_store(tmp_path)
    store = SqliteAccountStore(tmp_path)
    await store.update("kiro", enabled=False)
    assert await store.generation() == 42 and (await store.get("kiro")).enabled is False  # type: ignore[union-attr]


def test_an_adoption_that_fails_leaves_the_old_tables_as_they_were(tmp_path: Path) -> None:
    old_sqlite_store(tmp_path)
    with sqlite3.connect(tmp_path / DB_FILENAME) as db:  # a table in the way, which the copy fails on
        db.execute("CREATE TABLE q2api_accounts (id TEXT PRIMARY KEY, label TEXT NOT NULL)")
    with pytest.raises(StoreUnavailable, match="no column named auth_method"):
        SqliteAccountStore(tmp_path)
    with sqlite3.connect(tmp_path / DB_FILENAME) as db:
        assert db.execute("SELECT count(*) FROM accounts").fetchone()[0] == 2
        assert db.execute("SELECT value FROM store_meta").fetchone()[0] == 41


# -- a shared database of the two-schema releases (their shared_schema.py's tables) ----------------

old_metadata = sa.MetaData()
ID = sa.String(64)
TIMESTAMP = sa.Double()
old_accounts = sa.Table(
    "q2api_accounts",
    old_metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("label", sa.String(255), nullable=False),
    sa.Column("auth_method", sa.String(16), nullable=False),
    sa.Column("refresh_token", sa.Text),
    sa.Column("client_id", sa.String(255)),
    sa.Column("client_secret", sa.Text),
    sa.Column("profile_arn", sa.String(512)),
    sa.Column("access_token", sa.Text),
    sa.Column("expires_at", TIMESTAMP),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("status_detail", sa.Text),
    sa.Column("seed_fingerprint", sa.String(64)),
    sa.Column("token_generation", sa.BigInteger, nullable=False),
    sa.Column("created_at", TIMESTAMP, nullable=False),
    sa.Column("updated_at", TIMESTAMP, nullable=False),
    sa.Column("refreshed_at", TIMESTAMP),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("region", sa.String(32)),
)
old_meta = sa.Table(
    "q2api_meta",
    old_metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)
old_stats = sa.Table(
    "q2api_account_stats",
    old_metadata,
    sa.Column("account_id", ID, primary_key=True),
    sa.Column("requests", sa.BigInteger, nullable=False),
    sa.Column("failures", sa.BigInteger, nullable=False),
    sa.Column("last_error", sa.Text),
    sa.Column("last_used_at", TIMESTAMP),
)
sa.Table(
    "q2api_logins",
    old_metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("label", sa.String(255), nullable=False),
    sa.Column("method", sa.String(32), nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("account_id", ID),
    sa.Column("detail", sa.Text),
    sa.Column("expires_at", TIMESTAMP, nullable=False),
    sa.Column("created_at", TIMESTAMP, nullable=False),
)
old_rests = sa.Table(
    "q2api_account_rests",
    old_metadata,
    sa.Column("account_id", ID, primary_key=True),
    sa.Column("until", TIMESTAMP, nullable=False),
    sa.Column("reason", sa.String(32), nullable=False),
)
sa.Table(
    "q2api_responses",
    old_metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("owner", sa.String(64), nullable=False),
    sa.Column("previous_response_id", ID),
    sa.Column("created_at", TIMESTAMP, nullable=False),
    sa.Column("expires_at", TIMESTAMP, nullable=False, index=True),
    sa.Column("model", sa.String(255), nullable=False),
    sa.Column("record", sa.Text().with_variant(mysql.LONGTEXT(), "mysql"), nullable=False),
)
old_migrations = sa.Table(
    "q2api_schema_migrations",
    old_metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("description", sa.String(255), nullable=False),
    sa.Column("applied_at", TIMESTAMP, nullable=False),
)


@pytest.fixture(params=SHARED_KINDS)
def old_shared_url(request: pytest.FixtureRequest) -> Iterator[str]:
    secrets = SecretBox(TEST_SECRET_KEY)
    with scratch_database_url(request.param) as url:

        async def build(connection: sa.ext.asyncio.AsyncConnection) -> None:
            await connection.run_sync(old_metadata.create_all)
            versions = ["accounts, store generation, stats, logins", "the store generation starts at 0"]
            versions += ["shared account cool-downs", "stored Responses API conversations"]
            for version, description in enumerate(versions, start=1):
                await connection.execute(
                    sa.insert(old_migrations).values(version=version, description=description, applied_at=1.0)
                )
            await connection.execute(sa.insert(old_meta).values(name="generation", value=9))
            account = {"id": "acc1", "label": "work", "auth_method": "idc", "client_id": "cid", "status": "active"}
            account |= {"refresh_token": secrets.seal("refresh-SECRET"), "client_secret": secrets.seal("cs-SECRET")}
            account |= {"token_generation": 3, "created_at": 1.0, "updated_at": 2.0, "enabled": True}
            await connection.execute(sa.insert(old_accounts).values(**account))
            await connection.execute(sa.insert(old_stats).values(account_id="acc1", requests=4, failures=1))
            await connection.execute(sa.insert(old_rests).values(account_id="acc1", until=FUTURE, reason="throttled"))

        run_sql(url, build)
        yield url


async def test_a_shared_database_of_the_two_schema_releases_is_adopted_in_place(old_shared_url: str, tmp_path) -> None:
    store = await open_account_store(old_shared_url, tmp_path, TEST_SECRET_KEY)
    try:
        (account,) = await store.accounts()
        assert (account.id, account.refresh_token, account.client_secret) == ("acc1", "refresh-SECRET", "cs-SECRET")
        assert account.token_generation == 3 and await store.generation() == 9
        assert (await store.read_stats())["acc1"].requests == 4
        assert (await store.read_rests())["acc1"].reason == "throttled"
        await store.update("acc1", label="renamed")
        assert await store.generation() == 10
    finally:
        await store.close()
    versions = sorted(row.version for row in raw_rows(old_shared_url, store_schema.STORE_MIGRATIONS.bookkeeping))
    # Only the later steps ran: the one that adopts an old SQLite file (nothing to do here), the proxy column.
    assert versions == [1, 2, 3, 4, 5, 6]
