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

A turn of a pinned conversation (session affinity, q2api.amazonq.turn_affinity) asks `take_pinned`
first: its account while it is eligible — in the pool, not resting, its catalogue has the model, not
failed on this request, and a slot free within PINNED_SLOT_WAIT — else the ranking above, with the
reason it was not the pinned account.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from q2api.amazonq.account_access import Credential, CredentialPool
from q2api.amazonq.errors import AccountsBusy, ModelNotServed, NoAccountConfigured
from q2api.amazonq.inflight import InflightSlots
from q2api.amazonq.turn_affinity import PINNED_SLOT_WAIT, MoveReason

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

    async def take_pinned(
        self, pinned: str, model: str | None, resting: Collection[str] = ()
    ) -> tuple[Credential, MoveReason | None]:
        """The pinned account with its slot taken, while it is eligible (then the reason is None); else
        `take`'s account and the reason the pinned one was passed over."""
        why = self.unfit(pinned, model, resting)
        if why is None:
            chosen = self._pool.manager(pinned)
            if chosen is None:
                why = "disabled"
            elif await self._slot_within(pinned, min(PINNED_SLOT_WAIT, self._wait)):
                return chosen, None
            else:
                why = "busy"
        return await self.take(model, resting), why

    def unfit(self, account_id: str, model: str | None, resting: Collection[str] = ()) -> MoveReason | None:
        """Why `account_id` may not take this call now (its slots aside), or None."""
        if account_id in resting:
            return "failed"  # it failed this request on its own: the retry goes elsewhere
        why = self._pool.unfit(account_id, model)
        if why in ("disabled", "needs_login", "resting", "model"):
            return why  # type: ignore[return-value]  # the pool's reasons are MoveReason's
        return None

    async def _slot_within(self, account_id: str, seconds: float) -> bool:
        """A slot of `account_id` taken (across the fleet too), now or within `seconds`; False when it
        stayed full."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            if self.inflight.has_free_slot(account_id) and await self.inflight.acquire(account_id):
                return True
            remaining = deadline - loop.time()
            if remaining <= 0 or not await self.inflight.wait_for_release(remaining):
                return False

    def release(self, account_id: str) -> None:
        """The call made with `account_id` failed, or its reply ended: its slot is free again."""
        self.inflight.release(account_id)
