"""Hot reload: every worker follows the store's accounts without a restart.

Each worker reads the store's generation (one small query) every `interval`
seconds; when another process (the CLI, the admin API on another worker,
another replica) has changed an account, the pool re-syncs with the store.
The same tick adds this worker's request counts to the shared stats and
swaps cool-downs with the other workers and replicas.

The reloader never dies silently: a store that fails is one WARNING when the
failures begin and one INFO when they end (the pool keeps serving what it
has); any other error is logged with its traceback and the ticks go on with a
growing delay; and should the loop itself end, it is logged and restarted.
While it cannot run, `failure` says why, for `/readyz`.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from loguru import logger

from q2api.accounts.pool import AccountPool
from q2api.accounts.store_protocol import CredentialStore, TelemetryStore
from q2api.store.errors import STORE_ERRORS

DEFAULT_RELOAD_INTERVAL = 2.0
MAX_RETRY_DELAY = 60.0  # seconds between ticks at most while ticks crash


class ReloadedStore(CredentialStore, TelemetryStore, Protocol):
    """What a tick reads and writes: the generation and accounts, the stats and the cool-downs."""


class AccountReloader:
    def __init__(self, store: ReloadedStore, pool: AccountPool, *, interval: float = DEFAULT_RELOAD_INTERVAL) -> None:
        self._store = store
        self._pool = pool
        self._interval = interval
        self._seen_generation: int | None = None
        self._lock = asyncio.Lock()  # one sync at a time: a tick and an admin change may coincide
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._store_failing = False  # the last tick failed on the store (logged once)
        self._delay = interval  # until the next tick: grows while ticks crash
        self.failure: str | None = None  # why the reloader cannot do its work now, None while it can

    def start(self) -> None:
        """Tick every `interval` seconds in the background until `stop`."""
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._task.add_done_callback(self._supervise)

    async def stop(self) -> None:
        """Stop ticking and write this worker's last counts."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self.flush_stats()
        except STORE_ERRORS as exc:
            logger.warning(f"could not write the last account stats: {exc}")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._delay)
            try:
                await self.tick()
            except STORE_ERRORS as exc:
                if not self._store_failing:
                    logger.warning(f"account reload failed, trying again every {self._interval:g}s: {exc}")
                self._store_failing = True
            except Exception as exc:
                first = self.failure is None
                self.failure = f"the account reloader fails: {type(exc).__name__}"
                self._delay = min(max(self._delay * 2, self._interval), MAX_RETRY_DELAY)
                logger.opt(exception=exc if first else None).error(
                    f"account reload failed ({type(exc).__name__}: {exc}); trying again in {self._delay:g}s"
                )
            else:
                if self._store_failing or self.failure is not None:
                    logger.info("account reload works again")
                self._store_failing = False
                self.failure = None
                self._delay = self._interval

    def _supervise(self, task: asyncio.Task[None]) -> None:
        """The loop ended without `stop`: say so, and start it again after a delay."""
        if self._stopping or task.cancelled():
            return
        error = task.exception()
        self.failure = f"the account reloader stopped: {type(error).__name__}"
        self._delay = min(max(self._delay * 2, self._interval), MAX_RETRY_DELAY)
        logger.opt(exception=error).error(f"the account reloader stopped; starting it again in {self._delay:g}s")
        task.get_loop().call_later(self._delay, self._restart)

    def _restart(self) -> None:
        if not self._stopping:
            self.start()

    async def tick(self, *, force: bool = False) -> None:
        """Flush the stats, and re-sync the pool if the store changed (or `force`)."""
        async with self._lock:
            await self.flush_stats()
            await self._share_rests()
            generation = await self._store.generation()
            if not force and generation == self._seen_generation:
                return
            accounts = await self._store.accounts()
            self._pool.sync(accounts)
            self._seen_generation = generation

    async def _share_rests(self) -> None:
        mine = self._pool.take_rests()
        try:
            begun = {account_id: rest for account_id, rest in mine.items() if rest is not None}
            await self._store.add_rests(begun)
            await self._store.clear_rests([key for key, rest in mine.items() if rest is None])
        except BaseException:
            for account_id, rest in mine.items():  # not lost: the next tick writes them
                self._pool.requeue_rest(account_id, rest)
            raise
        self._pool.adopt_rests(await self._store.read_rests())

    async def flush_stats(self) -> None:
        pending = self._pool.stats.take()
        try:
            await self._store.add_stats(pending)
        except BaseException:
            self._pool.stats.restore(pending)
            raise
