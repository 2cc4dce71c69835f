"""Account stores for tests: every kind of database opened alike, and stores driven from synchronous code.

`store_opener(kind, tmp_path)` opens handles on one store of `kind` (the SQLite file in `tmp_path`,
or a scratch schema on the PostgreSQL / MariaDB server), as several workers or replicas would, and
closes them all at the end: the contract suites run on `STORE_KINDS`.

The store's methods are coroutines; `BlockingStore` runs each call to its end
before returning (CLI tests, set-up before a gateway process starts). A SQLite
store's calls each get a fresh event loop; a shared store's calls share one
loop (its connections belong to the loop that opened them), which `close()`
ends. Async tests use the stores directly instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from q2api.accounts.opening import open_account_store
from q2api.accounts.store import SqliteAccountStore
from q2api.accounts.store_protocol import AccountStore
from tests.support.databases import TEST_SECRET_KEY, scratch_database_url

STORE_KINDS = ("sqlite", "postgresql", "mysql")
OpenStore = Callable[..., Awaitable[AccountStore]]  # keyword options of `open_account_store`


@contextlib.asynccontextmanager
async def store_opener(kind: str, tmp_path: Path) -> AsyncIterator[OpenStore]:
    """`await open_store()` opens another handle on one store of `kind`; every handle is closed at the end."""
    opened: list[AccountStore] = []

    def opener(url: str | None) -> OpenStore:
        async def open_one(**options: Any) -> AccountStore:
            store = await open_account_store(url, tmp_path, TEST_SECRET_KEY, **options)
            opened.append(store)
            return store

        return open_one

    try:
        if kind == "sqlite":
            yield opener(None)
        else:
            with scratch_database_url(kind) as url:
                try:
                    yield opener(url)
                finally:
                    await _close_all(opened)  # before the schema is dropped
    finally:
        await _close_all(opened)


async def _close_all(stores: list[AccountStore]) -> None:
    while stores:
        await stores.pop().close()


class BlockingStore:
    def __init__(self, store: AccountStore, runner: asyncio.Runner | None = None) -> None:
        self.store = store
        self._runner = runner

    @classmethod
    def open(cls, database_url: str | None, data_dir: str | Path, secret_key: str | None) -> BlockingStore:
        runner = asyncio.Runner()
        return cls(runner.run(open_account_store(database_url, data_dir, secret_key)), runner)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.store, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute
        return lambda *args, **kwargs: self._run(attribute(*args, **kwargs))

    def close(self) -> None:
        self._run(self.store.close())
        if self._runner is not None:
            self._runner.close()

    def _run(self, call: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run(call) if self._runner is None else self._runner.run(call)


def sqlite_store(data_dir: str | Path) -> BlockingStore:
    """The SQLite store in `data_dir`, opened like a worker opens it; nothing to close."""
    return BlockingStore(SqliteAccountStore(data_dir))
