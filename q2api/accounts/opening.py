"""Open the account store the settings name: the SQLite file by default, a shared database by URL.

A process that keeps more than the accounts in the database (the gateway: stored responses, client
keys, counters, the ledger) opens the database once (q2api.store.opening) and puts the account store
on it with `account_store_on`; `open_account_store` is the database and the store together, for the
commands that need the accounts alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from q2api.accounts.store import DEFAULT_CHAINS, PlainSecrets, SqlAccountStore, file_refresh_lock
from q2api.accounts.store_protocol import AccountStore
from q2api.store.database import StoreDatabase
from q2api.store.database_url import parse_database_url
from q2api.store.migrations import MigrationChain
from q2api.store.opening import open_database
from q2api.store.secret_box import SECRET_KEY_VARIABLE, SecretBox
from q2api.store.sqlite_database import SqliteDatabase


async def open_account_store(
    database_url: str | None,
    data_dir: str | Path,
    secret_key: str | None,
    *,
    chains: Sequence[MigrationChain] = DEFAULT_CHAINS,
) -> AccountStore:
    """`database_url` empty: the SQLite store in `data_dir`; else the shared store it names.

    `chains`: the schema migrations to bring up to date, the store's own first (a module that keeps
    tables beside the accounts adds its chain here: docs/architecture.md, "The store").

    Raises ValueError for a malformed URL or a shared store without a secret key,
    StoreUnavailable when the database cannot be reached or migrated. The caller
    closes the store (`await store.close()`, which closes its database) in the same event loop.
    """
    if database_url:
        _secret_key_for(parse_database_url(database_url).masked, secret_key)  # before connecting
    database = await open_database(database_url, data_dir, chains)
    try:
        return account_store_on(database, secret_key)
    except BaseException:
        await database.close()
        raise


def account_store_on(database: StoreDatabase, secret_key: str | None) -> SqlAccountStore:
    """The account store on an opened, migrated database; closing the store closes the database.

    Raises ValueError for a shared database without a secret key.
    """
    if isinstance(database, SqliteDatabase):
        # The file is private to its user (0600 in a 0700 directory): secrets are kept as they are.
        return SqlAccountStore(
            database, PlainSecrets(), file_refresh_lock(database.path.parent), str(database.path.resolve())
        )
    # Imported here: a shared database brings SQLAlchemy's asyncio extension and the async drivers.
    from q2api.accounts.shared_opening import database_refresh_lock
    from q2api.store.shared_database import SharedDatabase

    assert isinstance(database, SharedDatabase)
    secrets = SecretBox(_secret_key_for(database.url.masked, secret_key))
    return SqlAccountStore(database, secrets, database_refresh_lock(database), database.url.masked)


def _secret_key_for(masked_url: str, secret_key: str | None) -> str:
    if not secret_key:
        raise ValueError(
            f"a shared store ({masked_url}) keeps refresh tokens and client secrets encrypted: set {SECRET_KEY_VARIABLE}"
        )
    return secret_key


@contextlib.asynccontextmanager
async def opened_account_store(
    database_url: str | None, data_dir: str | Path, secret_key: str | None
) -> AsyncIterator[AccountStore]:
    """`open_account_store` for the length of a block, closed at its end however it ends."""
    store = await open_account_store(database_url, data_dir, secret_key)
    try:
        yield store
    finally:
        await store.close()
