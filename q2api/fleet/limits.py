"""The accounts' in-flight cap and their hosts' rests, held across every worker and replica.

`FleetLimits` is what q2api.amazonq's in-flight slots (`FleetSlots`) and host rests (`FleetRests`)
are given: taking a slot is one round trip to the ledger (Redis, or the store), which also brings the
account's host rests back; giving it back, beginning or ending a rest is one more, sent without
waiting. The slots this process holds are renewed every SLOT_RENEW_SECONDS while their requests run
(q2api.tenants.lease_renewal, as for the client keys' places in flight), so those of a worker that
died are free again within SLOT_LEASE_SECONDS.

While the ledger cannot be used (down, or slower than TAKE_TIMEOUT), each process counts its own
slots and keeps its own rests, as before there was a fleet: the cap then holds per worker. The log
says so once a minute (q2api.tenants.outage, as `Q2API_LIMITS_WHEN_STORE_DOWN` does for the key
counters), and the ledger is asked again RETRY_AFTER_FAILURE seconds after each failure, so an outage
does not cost every request a timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from q2api.amazonq.inflight import FleetAnswer
from q2api.fleet.ledger import SLOT_RENEW_SECONDS, FleetLedger, Rests
from q2api.fleet.store_ledger import StoreLedger
from q2api.store.database import StoreDatabase
from q2api.tenants.counters import new_lease
from q2api.tenants.lease_renewal import LeaseRenewal
from q2api.tenants.outage import Outage

# Seconds a request waits for the ledger's verdict before counting in its process alone: a busy store
# queues takes for hundreds of milliseconds (BENCHMARKS.md), which is not an outage.
TAKE_TIMEOUT = 5.0
RETRY_AFTER_FAILURE = 5.0  # seconds the ledger is left alone after it failed
_MAX_SLOT_AGE = 6 * 3600.0  # a slot is renewed this long at most (a request never told to end: a bug)
_CLOSE_WAIT = 2.0  # seconds `close` waits for the give-backs still on their way


class FleetLimits:
    def __init__(self, ledger: FleetLedger, *, on_unshared: Callable[[], None] = lambda: None) -> None:
        """`on_unshared`: told of each slot counted in this process alone (the server's /metrics)."""
        self._ledger = ledger
        self._on_unshared = on_unshared
        self.outage = Outage(
            "the accounts' shared in-flight slots and host rests",
            "each worker counts its own in-flight slots (Q2API_ACCOUNT_MAX_INFLIGHT per worker) and keeps its "
            "own host rests while it lasts",
        )
        self._held = LeaseRenewal(
            ledger.renew, lambda exc: self.outage.failed(exc, "with a slot not renewed"), max_age=_MAX_SLOT_AGE
        )
        self._rests: dict[str, Rests] = {}  # what the ledger last said of each account's rests
        self._background: set[asyncio.Task[None]] = set()
        self._giving_back: dict[str, set[asyncio.Task[None]]] = {}  # by account: give-backs on their way
        self._failed_at: float | None = None
        self._closed = False  # after `close`, nothing more is sent: what is still held expires on its own
        self._last_error: Exception | None = None

    def start(self) -> None:
        self._held.start(SLOT_RENEW_SECONDS)

    async def close(self) -> None:
        await self._held.close()
        if self._background:
            await asyncio.wait(set(self._background), timeout=_CLOSE_WAIT)
        self._closed = True
        await self._ledger.close()

    async def settled(self) -> None:
        """Wait for what was sent in the background (give-backs, rests) to be answered."""
        while self._background:
            await asyncio.wait(set(self._background))

    @property
    def slots_held(self) -> int:
        return len(self._held)

    # -- FleetSlots ------------------------------------------------------------------------------

    async def take(self, account_id: str, cap: int) -> FleetAnswer:
        if self._resting_after_failure():
            assert self._last_error is not None
            self.outage.failed(self._last_error, "counted in its worker alone")
            self._on_unshared()
            return FleetAnswer(None, 0, shared=False)
        lease = new_lease()
        try:
            # A verdict that comes later than this is not waited for: a slot it took is never renewed,
            # and expires on its own.
            async with asyncio.timeout(TAKE_TIMEOUT):
                taken = await self._ledger.take(account_id, lease, cap)
                if taken.lease is None and await self._given_back(account_id):
                    # A call of this process ended a moment ago and its slot is on its way back: the next
                    # call of the same turn (after a web search, a retry) is not refused for its own slot.
                    taken = await self._ledger.take(account_id, lease, cap)
        except Exception as exc:
            self._failed(exc, "counted in its worker alone")
            self._on_unshared()
            return FleetAnswer(None, 0, shared=False)
        self._answered()
        self._rests[account_id] = taken.rests
        if taken.lease is not None:
            self._held.hold(taken.lease, account_id)
        return FleetAnswer(taken.lease, taken.in_flight)

    def give_back(self, account_id: str, lease: str) -> None:
        self._held.drop(lease)
        task = self._send(self._ledger.give_back(account_id, lease), "with a slot not given back (it expires)")
        pending = self._giving_back.setdefault(account_id, set())
        pending.add(task)

        def given_back(done: asyncio.Task[None]) -> None:
            pending.discard(done)
            if not pending and self._giving_back.get(account_id) is pending:
                del self._giving_back[account_id]

        task.add_done_callback(given_back)

    async def _given_back(self, account_id: str) -> bool:
        """Wait for the slots of `account_id` this process is giving back; whether there were any."""
        pending = self._giving_back.get(account_id)
        if not pending:
            return False
        await asyncio.wait(set(pending))
        return True

    # -- FleetRests ------------------------------------------------------------------------------

    def rests_of(self, account_id: str) -> Rests:
        return self._rests.get(account_id, {})

    def rest(self, account_id: str, host_url: str, failures: int, until: float) -> None:
        self._rests.setdefault(account_id, {})[host_url] = (failures, until)
        self._send(self._ledger.rest(account_id, host_url, failures, until), "with a host rest kept in its worker")

    def served(self, account_id: str, host_url: str) -> None:
        self._rests.get(account_id, {}).pop(host_url, None)
        self._send(self._ledger.served(account_id, host_url), "with a host rest ended in its worker alone")

    # -- the ledger's health -----------------------------------------------------------------------

    def _send(self, call: Coroutine[Any, Any, None], touched: str) -> asyncio.Task[None]:
        async def send() -> None:
            if self._closed:
                call.close()
                return
            try:
                async with asyncio.timeout(TAKE_TIMEOUT):
                    await call
            except Exception as exc:
                self._failed(exc, touched)
            else:
                self._answered()

        task = asyncio.get_running_loop().create_task(send())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def _resting_after_failure(self) -> bool:
        return self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_AFTER_FAILURE

    def _failed(self, exc: Exception, touched: str) -> None:
        self._failed_at = time.monotonic()
        self._last_error = exc
        self.outage.failed(exc, touched)

    def _answered(self) -> None:
        self._failed_at = None
        self.outage.answered()


def fleet_limits(
    database: StoreDatabase, redis_url: str | None, redis_prefix: str, *, on_unshared: Callable[[], None] = lambda: None
) -> FleetLimits:
    """The fleet's limits kept in Redis when there is one (`Q2API_REDIS_URL`), else in `database` (the
    store's, whose migrations include FLEET_MIGRATIONS); `start` it in the running loop, `close` it after."""
    if redis_url:
        from q2api.fleet.redis_ledger import RedisLedger  # redis is imported only when used

        return FleetLimits(RedisLedger(redis_url, redis_prefix), on_unshared=on_unshared)
    return FleetLimits(StoreLedger(database), on_unshared=on_unshared)
