"""Account stores driven from synchronous test code (CLI tests, set-up before a gateway process starts).

The store's methods are coroutines; `BlockingStore` runs each call to its end
before returning. A SQLite store's calls each get a fresh event loop; a shared
store's calls share one loop (its connections belong to the loop that opened
them), which `close()` ends. Async tests use the stores directly instead.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from q2api.accounts.opening import open_account_store
from q2api.accounts.store import SqliteAccountStore
from q2api.accounts.store_protocol import AccountStore


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
