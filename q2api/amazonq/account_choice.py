"""Which account makes the next call to Amazon Q: the least busy, then the least recently used.

Every attempt of a request (its retries and account switches included) asks `AccountChoice.take` for
an account and gets one with an in-flight slot already taken (q2api.amazonq.inflight: in this process,
and across the fleet when there is one); the caller gives the slot back with `release` when the call
fails or its reply ends.

The ranking, in order:

1. only accounts whose catalogue has the request's model (another would answer INVALID_MODEL_ID);
2. accounts that have not failed this request on their own (`resting`) before those that have;
3. the least busy (fewest requests in flight), so a burst spreads over the accounts;
4. among equally busy ones, the least recently used (the pool's own order, q2api.accounts.pool).

A request that finds every eligible account at its cap waits up to `wait` seconds for a slot, then
gets AccountsBusy (the door's "overloaded" answer with a `retry-after`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from q2api.amazonq.account_access import Credential, CredentialPool
from q2api.amazonq.errors import AccountsBusy, ModelNotServed, NoAccountConfigured
from q2api.amazonq.inflight import InflightSlots

BUSY_RETRY_AFTER_SECONDS = 5  # a reply takes seconds to minutes; a short wait lets a few finish


class AccountChoice:
    def __init__(self, pool: CredentialPool, inflight: InflightSlots, *, wait: float) -> None:
        self._pool = pool
        self.inflight = inflight
        self._wait = wait

    def pick(self, model: str | None, resting: Collection[str] = ()) -> Credential | None:
        """The account for the next call, or None when every eligible one is at its cap.

        The least busy account that may serve, preferring those not in `resting`; a resting one
        rather than none.
        """
        avoid = set(resting)
        for level in self.inflight.levels():  # idle accounts first, then the next least busy
            chosen = self._pool.pick(exclude=avoid | self.inflight.busier_than(level), model=model)
            if chosen is not None:
                return chosen
        return self._pool.pick(exclude=self.inflight.full(), model=model)

    async def take(self, model: str | None, resting: Collection[str] = ()) -> Credential:
        """An account for the next call, its in-flight slot taken; waits briefly when all are full.

        Raises NoAccountConfigured (the pool emptied), ModelNotServed (no account has `model`),
        AccountsBusy (every eligible account stayed full for `wait` seconds).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._wait
        while True:
            chosen = self.pick(model, resting)
            if chosen is not None:
                if await self.inflight.acquire(chosen.account_id):
                    return chosen
                continue  # full across the fleet: `pick` now knows it, and looks at the others
            if self._pool.pick(model=model) is None:  # not busy: no account may serve at all
                if not len(self._pool):  # every account left the pool since the request started
                    raise NoAccountConfigured()
                raise ModelNotServed(model or "")
            remaining = deadline - loop.time()
            if remaining <= 0 or not await self.inflight.wait_for_release(remaining):
                raise AccountsBusy(self.inflight.cap, self._wait, retry_after=BUSY_RETRY_AFTER_SECONDS)

    def release(self, account_id: str) -> None:
        """The call made with `account_id` failed, or its reply ended: its slot is free again."""
        self.inflight.release(account_id)
