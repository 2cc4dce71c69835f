"""The in-flight slots of one process with a fleet behind them (q2api.amazonq.inflight): two processes'
slots sharing one count never hold more than the cap together, a refusal is remembered for a moment
(the least busy account is chosen fleet-wide), a crowd waiting on a full account asks the fleet once,
and a fleet that cannot count leaves the process's own count in charge."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from q2api.amazonq.inflight import FLEET_VIEW_SECONDS, FleetAnswer, InflightSlots

pytestmark = pytest.mark.asyncio


class SharedCount:
    """The fleet's count in memory, as Redis or the store keep it, with a short delay per take."""

    def __init__(self, delay: float = 0.0) -> None:
        self.leases: dict[str, set[str]] = {}
        self.takes = 0
        self.down = False
        self._delay = delay
        self._numbers = itertools.count()

    async def take(self, account_id: str, cap: int) -> FleetAnswer:
        self.takes += 1
        await asyncio.sleep(self._delay)
        if self.down:
            return FleetAnswer(None, 0, shared=False)
        held = self.leases.setdefault(account_id, set())
        if len(held) >= cap:
            return FleetAnswer(None, len(held))
        lease = f"lease-{next(self._numbers)}"
        held.add(lease)
        return FleetAnswer(lease, len(held))

    def give_back(self, account_id: str, lease: str) -> None:
        self.leases[account_id].discard(lease)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_two_processes_never_hold_more_than_the_cap_together():
    fleet = SharedCount()
    clock = Clock()
    one, other = InflightSlots(2, fleet, clock=clock), InflightSlots(2, fleet, clock=clock)
    assert await one.acquire("a")
    assert await other.acquire("a")
    assert not await one.acquire("a")  # this process holds one, the fleet two
    assert one.count("a") == 2 and "a" in one.full() and not one.has_free_slot("a")
    # The refusal is remembered: "a" looks full here without asking, until the view is stale.
    takes = fleet.takes
    assert one.levels() == [0] and one.busier_than(1) == {"a"}
    assert fleet.takes == takes
    other.release("a")
    clock.now += FLEET_VIEW_SECONDS
    assert one.count("a") == 1  # its own slot, the fleet's stale view forgotten
    assert await one.acquire("a")
    assert len(fleet.leases["a"]) == 2
    one.release("a")
    one.release("a")
    assert fleet.leases["a"] == set() and one.count("a") == 0


async def test_a_crowd_waiting_on_a_full_account_asks_the_fleet_once_per_look():
    fleet = SharedCount(delay=0.01)
    other = InflightSlots(1, fleet)
    assert await other.acquire("a")
    slots = InflightSlots(1, fleet, clock=Clock())
    assert not await slots.acquire("a")  # full: the fleet said so
    slots._seen.clear()  # the view is stale: the next look asks again
    takes = fleet.takes
    answers = await asyncio.gather(*(slots.acquire("a") for _ in range(20)))
    assert answers == [False] * 20
    assert fleet.takes == takes + 1
    other.release("a")
    slots._seen.clear()
    assert await slots.acquire("a")


async def test_with_the_fleet_unable_to_count_the_process_count_holds():
    fleet = SharedCount()
    fleet.down = True
    slots = InflightSlots(2, fleet)
    assert await slots.acquire("a") and await slots.acquire("a")
    assert not await slots.acquire("a")
    slots.release("a")
    assert await slots.acquire("a")
    assert fleet.leases == {}


async def test_a_wait_with_a_fleet_ends_to_look_again_while_time_is_left():
    slots = InflightSlots(1, SharedCount())
    assert await slots.wait_for_release(10 * FLEET_VIEW_SECONDS)  # nothing released here: time to ask again
    assert not await slots.wait_for_release(FLEET_VIEW_SECONDS / 5)  # the wait is over
    alone = InflightSlots(1)
    assert not await alone.wait_for_release(FLEET_VIEW_SECONDS)  # no fleet: only a release ends it early
