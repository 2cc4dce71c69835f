"""Open the account store the settings name: the SQLite file by default, a shared database by URL."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from q2api.accounts.store import DEFAULT_CHAINS, SqlAccountStore, SqliteAccountStore
from q2api.accounts.store_protocol import AccountStore
from q2api.store.database_url import parse_database_url
from q2api.store.migrations import MigrationChain
from q2api.store.secret_box import SECRET_KEY_VARIABLE, SecretBox
from q2api.stored_responses.sql_store import SqlResponseStore
from q2api.stored_responses.store import ResponseStore


async def open_account_store(
    database_url: str | None,
    data_dir: str | Path,
    secret_key: str | None,
    *,
    chains: Sequence[MigrationChain] = DEFAULT_CHAINS,
) -> AccountStore:
    """`database_url` empty: the SQLite store in `data_dir`; else the shared store it names.

    `chains`: the schema migrations to bring up to date, the store's own first (a module that keeps
    tables beside the accounts may add its chain here, or migrate it on its own connection as the
    tenants do: docs/architecture.md, "The store").

    Raises ValueError for a malformed URL or a shared store without a secret key,
    StoreUnavailable when the database cannot be reached or migrated. The caller
    closes the store (`await store.close()`) in the same event loop.
    """
    if not database_url:
        # Creating the file may wait for another worker's set-up (a file lock): not on the event loop.
        return await asyncio.to_thread(functools.partial(SqliteAccountStore, data_dir, chains=chains))
    url = parse_database_url(database_url)
    if not secret_key:
        raise ValueError(
            f"a shared store ({url.masked}) keeps refresh tokens and client secrets encrypted: "
            f"set {SECRET_KEY_VARIABLE}"
        )
    # Imported here: a shared database brings SQLAlchemy's asyncio extension and the async drivers,
    # which the default SQLite store never needs.
    from q2api.accounts.shared_opening import open_shared_store

    return await open_shared_store(url, SecretBox(secret_key), chains)


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


def response_store_for(store: AccountStore) -> ResponseStore:
    """The stored Responses conversations that live beside `store`'s accounts (same file or database)."""
    if isinstance(store, SqlAccountStore):
        return SqlResponseStore(store.database)
    raise TypeError(f"no response store goes with {type(store).__name__}")
