"""Requests in flight per account, capped: Amazon Q tolerates a handful of concurrent requests per
account (peers report 5–8), and a pile-up beyond that ends in throttling of every account.

A slot is taken when an account is chosen for a call and given back when the reply ends (or the
call fails). A request that finds every eligible account full waits briefly for a slot
(`wait_for_release`); q2api.amazonq.account_choice then answers it "overloaded" with a `retry-after`.

Each process counts its own slots; with a `FleetSlots` (q2api.fleet: Redis, or the store) the cap
holds across every worker and replica too. Then taking a slot (`acquire`) costs one round trip to
the fleet's count, after this process's own count said yes, and giving it back (`release`) one more,
sent without waiting. What the fleet answered about an account (how many it has in flight) is
remembered for a moment (`FLEET_VIEW_SECONDS`), so the least busy account is chosen fleet-wide and a
request waiting for a slot asks the fleet again at that pace, not in a tight loop; while one request
of this process asks about an account the fleet last said was full, the others wait for its answer
instead of asking too.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import time
from collections.abc import Callable
from typing import Protocol

# How long the fleet's count of an account is taken as true without asking again: also the pace at
# which a request waiting for a slot held elsewhere looks again.
FLEET_VIEW_SECONDS = 0.25


@dataclasses.dataclass(frozen=True, slots=True)
class FleetAnswer:
    """The fleet's verdict on one slot."""

    lease: str | None  # the slot, to give back; None: refused (or not counted, see `shared`)
    in_flight: int  # the account's requests in flight across the fleet, this one included when taken
    shared: bool = True  # False: the fleet's count could not be used; this process's count alone decides


class FleetSlots(Protocol):
    """Slots counted across every worker and replica (q2api.fleet.limits)."""

    async def take(self, account_id: str, cap: int) -> FleetAnswer: ...

    def give_back(self, account_id: str, lease: str) -> None:
        """Give `lease` back without waiting (sent in the background; it expires anyway if that fails)."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class _Seen:
    in_flight: int
    until: float  # monotonic: after this, the fleet is asked again


class InflightSlots:
    def __init__(
        self, cap: int, fleet: FleetSlots | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if cap < 1:
            raise ValueError("an account needs at least one slot")
        self.cap = cap
        self.fleet = fleet
        self._clock = clock
        self._counts: collections.Counter[str] = collections.Counter()
        self._leases: dict[str, list[str]] = {}  # the fleet's leases of this process's slots, by account
        self._seen: dict[str, _Seen] = {}  # what the fleet last said of an account's slots
        self._full_lately: set[str] = set()  # accounts whose last take the fleet refused
        self._probes: dict[str, asyncio.Future[None]] = {}  # the one take asking for an account full lately
        self._released = asyncio.Event()  # set at each release; waiters clear it and wait again

    def count(self, account_id: str) -> int:
        """Requests in flight on `account_id`: this process's, or the fleet's when it said more lately."""
        return max(self._counts[account_id], self._fleet_count(account_id))

    def _fleet_count(self, account_id: str) -> int:
        seen = self._seen.get(account_id)
        if seen is None:
            return 0
        if seen.until <= self._clock():
            del self._seen[account_id]
            return 0
        return seen.in_flight

    def _all_counts(self) -> dict[str, int]:
        accounts = set(self._counts) | set(self._seen)
        return {account_id: self.count(account_id) for account_id in accounts}

    def full(self) -> set[str]:
        return {account_id for account_id, count in self._all_counts().items() if count >= self.cap}

    def has_free_slot(self, account_id: str) -> bool:
        """Whether `account_id` looks free (this process's count and the fleet's last word on it)."""
        return self.count(account_id) < self.cap

    def busier_than(self, level: int) -> set[str]:
        """Accounts with more than `level` requests in flight."""
        return {account_id for account_id, count in self._all_counts().items() if count > level}

    def levels(self) -> list[int]:
        """The in-flight counts below the cap, least busy first (0 always: an idle account may exist)."""
        return sorted({0, *(count for count in self._all_counts().values() if count < self.cap)})

    def take(self, account_id: str) -> None:
        """Count a slot in this process only (the fleet is asked by `acquire`)."""
        self._counts[account_id] += 1

    async def acquire(self, account_id: str) -> bool:
        """Take a slot of `account_id`, in this process and (with a fleet) across the fleet; False when
        it is full (the fleet's answer is then remembered for FLEET_VIEW_SECONDS)."""
        if self._counts[account_id] >= self.cap:
            return False
        if self.fleet is None:
            self._counts[account_id] += 1
            return True
        probe = self._probes.get(account_id)
        if probe is not None:
            # The account was full a moment ago and a request of this process is asking already: its
            # answer is this one's too (a waiting crowd asks the fleet once, not each of its members).
            await asyncio.shield(probe)
            return False
        if account_id in self._full_lately:
            probe = self._probes[account_id] = asyncio.get_running_loop().create_future()
        self._counts[account_id] += 1  # before the round trip: another request of this process sees it
        try:
            answer = await self.fleet.take(account_id, self.cap)
        except BaseException:  # cancelled while asking: a slot the fleet may have counted expires unrenewed
            self._drop(account_id)
            raise
        finally:
            if probe is not None:
                del self._probes[account_id]
                probe.set_result(None)
        if answer.lease is None and answer.shared:
            self._full_lately.add(account_id)
        else:
            self._full_lately.discard(account_id)
        if answer.shared:
            # A refusal is remembered as full, whatever cap the process that counted the others had.
            in_flight = answer.in_flight if answer.lease is not None else max(answer.in_flight, self.cap)
            self._seen[account_id] = _Seen(in_flight, self._clock() + FLEET_VIEW_SECONDS)
        if answer.lease is not None:
            self._leases.setdefault(account_id, []).append(answer.lease)
            return True
        if answer.shared:  # the fleet's slots of the account are all taken
            self._drop(account_id)
            return False
        return True  # the fleet cannot count now: this process's count alone holds

    def release(self, account_id: str) -> None:
        self._drop(account_id)
        leases = self._leases.get(account_id)
        if leases:
            lease = leases.pop()
            if not leases:
                del self._leases[account_id]
            assert self.fleet is not None
            self.fleet.give_back(account_id, lease)
            seen = self._seen.get(account_id)
            if seen is not None and seen.in_flight > 0:
                self._seen[account_id] = _Seen(seen.in_flight - 1, seen.until)
        self._released.set()

    def _drop(self, account_id: str) -> None:
        remaining = self._counts[account_id] - 1
        if remaining > 0:
            self._counts[account_id] = remaining
        else:
            del self._counts[account_id]

    async def wait_for_release(self, timeout: float) -> bool:
        """Wait until some slot is given back (True) or `timeout` passes (False). With a fleet, a slot
        given back by another process is not announced here: the wait ends after FLEET_VIEW_SECONDS
        (True, while time is left), when the fleet's count is worth asking again."""
        self._released.clear()
        looks_again = self.fleet is not None and timeout > FLEET_VIEW_SECONDS
        try:
            async with asyncio.timeout(FLEET_VIEW_SECONDS if looks_again else timeout):
                await self._released.wait()
        except TimeoutError:
            return looks_again
        return True
