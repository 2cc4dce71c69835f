"""What each account may use and has left: its model catalogue and its credits, asked of Amazon Q.

* Catalogues (`ListAvailableModels`) are read at start-up, every `catalogue_interval` seconds, on
  demand (a request for a model no catalogue has, at most every five minutes), and for an account
  the moment it joins a running gateway's pool (`q2api accounts add`, `login` or `import` while it
  runs, the admin API). Until that first read, a joining account neither adds to the models listed
  nor takes a request while another account can (it would be routed on the built-in table). A
  failed read keeps the account's last good catalogue, else the built-in table, with a WARNING
  either way. The pool learns each account's models, so a request only goes to an account that may
  use its model.
* Credits (`getUsageLimits`) are cached for `credits_max_age` seconds and read again in the
  background after an account serves a request once they are older. An account whose credits are
  used up rests until they reset, before a request fails on it. Between two reads, the credits each
  reply was metered (its `meteringEvent`, `note_metered`) are added to the figure, so it moves with
  every request instead of jumping every few minutes; the next read replaces it with Amazon Q's.

Neither call ever fails a chat request: their errors are logged and the cached answer stands.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from loguru import logger

from q2api.accounts.pool import QUOTA_COOLDOWN, AccountPool
from q2api.accounts.tokens import TokenManager
from q2api.amazonq.bearer import token_type_of
from q2api.amazonq.catalogue import Catalogue, CatalogueSource, fetch_catalogue, merge_catalogues
from q2api.amazonq.credits import Credits, fetch_credits, iso_time
from q2api.amazonq.observer import NO_OBSERVER, UpstreamObserver
from q2api.amazonq.service_api import ServiceApi, ServiceApis

T = TypeVar("T")

# A request for a model nobody has refreshes the catalogues, but not more often than this (seconds).
ON_DEMAND_MIN_INTERVAL = 300.0
# How long start-up waits for the first catalogues before serving with the built-in table.
STARTUP_WAIT = 10.0


class AccountDiscovery:
    def __init__(
        self,
        pool: AccountPool,
        api: ServiceApi | ServiceApis,
        *,
        fallback: Catalogue,
        catalogue_interval: float = 3600.0,
        credits_max_age: float = 300.0,
        live: bool = True,
        observer: UpstreamObserver = NO_OBSERVER,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`live=False`: Amazon Q is never asked on the gateway's own initiative (no start-up or
        periodic reads, none on demand or after a request); the built-in table serves.

        `fallback` (the built-in table, `q2api.models.table.builtin_catalogue()`) stands in for an
        account whose catalogue was never read."""
        self._pool = pool
        self._api = api  # one host for every account, or the host each account's chat goes to
        self._catalogue_interval = catalogue_interval
        self._credits_max_age = credits_max_age
        self._clock = clock
        self._live = live
        self._observer = observer
        self._builtin = fallback
        self._catalogues: dict[str, Catalogue] = {}
        self._joining: set[str] = set()  # accounts that joined a running pool, their catalogue not yet read
        self._merged: tuple[tuple[Catalogue, ...], Catalogue] = ((), self._builtin)  # (parts, their merge)
        self._credits: dict[str, Credits] = {}
        self._credit_reads: dict[str, asyncio.Task[Credits | None]] = {}
        self._catalogue_read: asyncio.Task[Catalogue] | None = None
        self._catalogues_read_at = 0.0
        self._background: set[asyncio.Future[Any]] = set()
        self._loop = _running_loop()  # where background reads run, whichever thread asks for them
        if live:
            pool.on_served = self._served
            pool.on_joined = self._joined
            pool.on_model_refused = self._model_refused

    # -- catalogues -------------------------------------------------------------

    def _api_for(self, manager: TokenManager) -> ServiceApi:
        return self._api.for_account(manager) if isinstance(self._api, ServiceApis) else self._api

    async def _on_hosts(self, manager: TokenManager, call: Callable[[ServiceApi], Awaitable[T]]) -> T:
        """`call` on the account's host; a Kiro API key whose host answers "not here" (401, 403, 404, no
        connection) moves on down its hosts as its chat would (ServiceApis.move_on), so a key whose first
        hosts refuse it gets its catalogue and credits from the host that takes it."""
        for _ in range(8):  # a bound: an account has three hosts at most, each moved past once
            api = self._api_for(manager)
            try:
                return await call(api)
            except Exception as exc:
                if not (isinstance(self._api, ServiceApis) and self._api.move_on(manager, api, exc)):
                    raise
        return await call(self._api_for(manager))

    async def _read(self, manager: TokenManager, fetch: Callable[..., Awaitable[T]]) -> T:
        """One of the account's service reads (`fetch_catalogue`, `fetch_credits`), on its hosts."""
        token = await manager.access_token()
        return await self._on_hosts(
            manager,
            lambda api: fetch(
                api,
                token,
                profile_arn=manager.profile_arn,
                fetched_at=self._clock(),
                token_type=token_type_of(manager.auth_kind),
                proxy_url=manager.proxy_url,
            ),
        )

    def catalogue(self) -> Catalogue:
        """Every model some account may use (the built-in table while none is known)."""
        managers = [manager for manager in self._pool.managers() if manager.account_id not in self._joining]
        if not managers:
            return self._builtin
        parts = tuple(self.account_catalogue(manager.account_id) for manager in managers)
        # Asked once per request, changed only by a catalogue read or an account change:
        # merged again only when one of its parts is another object.
        merged_from, merged = self._merged
        if len(parts) != len(merged_from) or any(a is not b for a, b in zip(parts, merged_from, strict=True)):
            merged = merge_catalogues(parts)
            self._merged = (parts, merged)
        return merged

    def account_catalogue(self, account_id: str) -> Catalogue:
        return self._catalogues.get(account_id, self._builtin)

    async def refresh_catalogues(self) -> Catalogue:
        """Read every account's catalogue now (one read at a time; a caller during one joins it)."""
        if self._catalogue_read is None or self._catalogue_read.done():
            self._catalogue_read = asyncio.ensure_future(self._read_catalogues())
        return await asyncio.shield(self._catalogue_read)

    def request_refresh(self) -> None:
        """Refresh the catalogues in the background unless that happened within ON_DEMAND_MIN_INTERVAL.
        Any thread may ask (large requests are prepared off the event loop)."""
        if not self._live:
            return
        if _running_loop() is None:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._refresh_if_due)
            return
        self._refresh_if_due()

    def _refresh_if_due(self) -> None:
        if self._clock() - self._catalogues_read_at >= ON_DEMAND_MIN_INTERVAL:
            self._catalogues_read_at = self._clock()
            self._spawn(self.refresh_catalogues())

    async def _read_catalogues(self) -> Catalogue:
        self._catalogues_read_at = self._clock()
        await asyncio.gather(*(self._read_catalogue(manager) for manager in self._pool.managers()))
        return self.catalogue()

    async def _read_catalogue(self, manager: TokenManager) -> None:
        account = manager.label
        try:
            fresh = await self._read(manager, fetch_catalogue)
            if not fresh.models:
                raise ValueError("Amazon Q listed no model")
        except Exception as exc:  # any failure: fall back, never stop serving
            effective = self._fallback(manager.account_id, account, exc)
        else:
            effective = fresh
            logger.bind(account=account).info(
                f"model catalogue read: {len(fresh.models)} models ({', '.join(fresh.ids)})"
            )
        self._catalogues[manager.account_id] = effective
        self._pool.set_models(manager.account_id, effective.ids)
        self._joining.discard(manager.account_id)

    def _fallback(self, account_id: str, account: str, exc: Exception) -> Catalogue:
        previous = self._catalogues.get(account_id)
        if previous is not None and previous.source is not CatalogueSource.BUILT_IN:
            logger.bind(account=account).warning(
                f"model catalogue unavailable ({exc}); keeping the one read at {iso_time(previous.fetched_at)}"
            )
            return previous.with_source(CatalogueSource.LAST_GOOD)
        logger.bind(account=account).warning(f"model catalogue unavailable ({exc}); using the built-in model table")
        return self._builtin

    def _joined(self, account_id: str) -> None:
        """An account joined the running pool: read its catalogue now, not at the next hourly read.
        Meanwhile, beside other accounts, it takes no request (alone, it serves on the built-in table)."""
        manager = self._pool.manager(account_id)
        if manager is None:
            return
        self._joining.add(account_id)
        if len(self._pool) > 1:
            self._pool.set_models(account_id, ())
        self._spawn(self._read_catalogue(manager))

    def _model_refused(self, account_id: str) -> None:
        """Amazon Q refused a model this account's catalogue lists: read its catalogue again now."""
        manager = self._pool.manager(account_id)
        if manager is not None:
            self._spawn(self._read_catalogue(manager))

    # -- credits ----------------------------------------------------------------

    def credits(self, account_id: str) -> Credits | None:
        """The last credits read for the account (no I/O)."""
        return self._credits.get(account_id)

    async def usage(self, account_id: str) -> Credits | None:
        """The account's credits, read again if the cached ones are older than the cache time;
        None when Amazon Q cannot tell. Raises KeyError for an unknown account."""
        manager = self._manager(account_id)
        cached = self._credits.get(account_id)
        if cached is not None and not self._stale(cached):
            return cached
        return await self.refresh_credits(manager)

    async def account_usage(self, account_id: str) -> dict[str, Any] | None:
        """`{"subscription", "used", "limit", "resets_at"}` for the admin API (None: unknown).
        Raises KeyError for an unknown account."""
        credits = await self.usage(account_id)
        return credits.as_dict() if credits is not None else None

    async def refresh_credits(self, manager: TokenManager) -> Credits | None:
        """Read the account's credits now (a read already under way is joined)."""
        read = self._credit_reads.get(manager.account_id)
        if read is None or read.done():
            read = self._credit_reads[manager.account_id] = asyncio.ensure_future(self._read_credits(manager))
        return await asyncio.shield(read)

    async def refresh_all_credits(self) -> None:
        await asyncio.gather(*(self.refresh_credits(manager) for manager in self._pool.managers()))

    async def _read_credits(self, manager: TokenManager) -> Credits | None:
        try:
            credits = await self._read(manager, fetch_credits)
        except Exception as exc:  # credits are informative; never a reason to fail anything
            logger.bind(account=manager.label).warning(f"credits unavailable: {exc}")
            return self._credits.get(manager.account_id)
        self._credits[manager.account_id] = credits
        self._observer.account_credits(manager.account_id, manager.label, credits.used, credits.limit)
        if credits.exhausted:
            rest = credits.resets_at - self._clock() if credits.resets_at else QUOTA_COOLDOWN
            self._pool.rest_until_reset(manager.account_id, rest)
        return credits

    def note_metered(self, account_id: str, credits: float) -> None:
        """A reply of the account was metered `credits`: the known figure moves by that much until the
        next `getUsageLimits` read says what Amazon Q counted (no I/O)."""
        known = self._credits.get(account_id)
        if known is None or credits <= 0:
            return
        moved = dataclasses.replace(known, used=known.used + credits)
        self._credits[account_id] = moved
        label = next((m.label for m in self._pool.managers() if m.account_id == account_id), account_id)
        self._observer.account_credits(account_id, label, moved.used, moved.limit)

    def _served(self, account_id: str) -> None:
        cached = self._credits.get(account_id)
        if cached is None or self._stale(cached):
            with contextlib.suppress(KeyError):
                self._spawn(self.refresh_credits(self._manager(account_id)))

    def _stale(self, credits: Credits) -> bool:
        return credits.fetched_at is None or self._clock() - credits.fetched_at >= self._credits_max_age

    def _manager(self, account_id: str) -> TokenManager:
        for manager in self._pool.managers():
            if manager.account_id == account_id:
                return manager
        raise KeyError(account_id)

    # -- lifecycle --------------------------------------------------------------

    async def start(self, *, wait: float = STARTUP_WAIT) -> None:
        """Read catalogues and credits, waiting up to `wait` seconds for them, then keep them fresh."""
        if not self._live:
            return
        first = asyncio.ensure_future(asyncio.gather(self.refresh_catalogues(), self.refresh_all_credits()))
        self._background.add(first)
        first.add_done_callback(self._background.discard)
        await asyncio.wait({first}, timeout=wait)
        if not first.done():
            logger.warning(f"model catalogues not read within {wait:g}s; serving with what is known meanwhile")
        if self._catalogue_interval > 0:
            self._spawn(self._every(self._catalogue_interval, self.refresh_catalogues))
        if self._credits_max_age > 0:
            self._spawn(self._every(self._credits_max_age, self.refresh_all_credits))

    async def stop(self) -> None:
        tasks = [*self._background, *self._credit_reads.values()]
        if self._catalogue_read is not None:
            tasks.append(self._catalogue_read)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @staticmethod
    async def _every(interval: float, action: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval)
            await action()

    def _spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
