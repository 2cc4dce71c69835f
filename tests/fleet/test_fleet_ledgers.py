"""The fleet's ledger of slots and host rests on SQLite, PostgreSQL, MariaDB and Redis: a slot is taken
atomically (many takers at once, from two ledgers on one place, never more than the cap), an unrenewed
slot expires, a renewed one does not, and the rests come back with each take; and what the in-flight
count does when the ledger is down (each process counts alone, one WARNING a minute)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest

from q2api.amazonq.inflight import InflightSlots
from q2api.fleet.ledger import FleetLedger, Rests, Taken
from q2api.fleet.limits import FleetLimits
from q2api.fleet.redis_ledger import RedisLedger
from q2api.fleet.store_ledger import StoreLedger
from q2api.fleet.tables import FLEET_MIGRATIONS
from q2api.store.opening import open_database
from q2api.tenants.counters import new_lease
from tests.support.gateway_harness import capture_logs
from tests.support.tenant_stores import DATABASE_KINDS, database_url_for, scratch_redis

pytestmark = pytest.mark.asyncio

PLACES = (*DATABASE_KINDS, "redis")


@pytest.fixture(params=PLACES)
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str | None]]:
    """(kind, URL): a database URL (None: SQLite in tmp_path), or a Redis URL with a prefix of its own."""
    if request.param == "redis":
        with scratch_redis() as redis_place:
            yield "redis", f"{redis_place.url}#{redis_place.prefix}"
        return
    with database_url_for(request.param, tmp_path) as url:
        yield request.param, url


@contextlib.asynccontextmanager
async def two_ledgers(place: tuple[str, str | None], tmp_path: Path) -> AsyncIterator[tuple[FleetLedger, FleetLedger]]:
    """Two ledgers on one place, as two replicas have (each its own engine or Redis connection)."""
    kind, url = place
    async with contextlib.AsyncExitStack() as stack:
        ledgers: list[FleetLedger] = []
        for _ in range(2):
            if kind == "redis":
                assert url is not None
                redis_url, prefix = url.split("#")
                ledger: FleetLedger = RedisLedger(redis_url, prefix)
                stack.push_async_callback(ledger.close)
            else:
                database = await open_database(url, tmp_path, (FLEET_MIGRATIONS,))
                stack.push_async_callback(database.close)
                ledger = StoreLedger(database)
            ledgers.append(ledger)
        yield ledgers[0], ledgers[1]


async def test_many_takers_at_once_never_get_more_than_the_cap(place, tmp_path):
    async with two_ledgers(place, tmp_path) as (one, other):
        answers = await asyncio.gather(*(ledger.take("acct-a", new_lease(), 3) for ledger in [one, other] * 10))
        taken = [answer for answer in answers if answer.lease is not None]
        assert len(taken) == 3
        assert all(answer.in_flight == 3 for answer in answers if answer.lease is None)
        # Another account has slots of its own.
        assert (await other.take("acct-b", new_lease(), 3)).in_flight == 1
        # A slot given back is free for whoever asks next, on either ledger.
        await one.give_back("acct-a", taken[0].lease)
        again = await other.take("acct-a", new_lease(), 3)
        assert again.lease is not None and again.in_flight == 3


async def test_an_unrenewed_slot_expires_and_a_renewed_one_holds(place, tmp_path, monkeypatch):
    for module in ("q2api.fleet.store_ledger", "q2api.fleet.redis_ledger"):
        monkeypatch.setattr(f"{module}.SLOT_LEASE_SECONDS", 1.0)
    async with two_ledgers(place, tmp_path) as (one, other):
        kept = await one.take("acct-a", new_lease(), 2)
        dropped = await one.take("acct-a", new_lease(), 2)
        assert kept.lease and dropped.lease
        assert (await other.take("acct-a", new_lease(), 2)).lease is None
        for _ in range(3):  # 1.5 s: past the unrenewed one's lease
            await asyncio.sleep(0.5)
            await one.renew("acct-a", [kept.lease])
        answer = await other.take("acct-a", new_lease(), 2)
        assert answer.lease is not None and answer.in_flight == 2  # the renewed slot, and this one


async def test_rests_come_back_with_each_take_until_they_end_or_are_served(place, tmp_path):
    async with two_ledgers(place, tmp_path) as (one, other):
        now = time.time()
        await one.rest("acct-a", "https://q.example/", 2, now + 120)
        await one.rest("acct-a", "https://old.example/", 1, now - 1)  # over already
        await one.rest("acct-b", "https://q.example/", 1, now + 60)
        answer = await other.take("acct-a", new_lease(), 2)
        assert answer.rests == {"https://q.example/": (2, pytest.approx(now + 120))}
        await one.rest("acct-a", "https://q.example/", 3, now + 240)  # a longer rest replaces the first
        assert (await other.take("acct-a", new_lease(), 2)).rests["https://q.example/"][0] == 3
        await other.served("acct-a", "https://q.example/")
        assert (await one.take("acct-a", new_lease(), 9)).rests == {}
        assert (await one.take("acct-b", new_lease(), 9)).rests != {}


class DownLedger:
    """A ledger whose store does not answer."""

    def __init__(self) -> None:
        self.calls = 0

    async def take(self, account_id: str, lease: str, cap: int) -> Taken:
        self.calls += 1
        raise ConnectionError("the fleet's store is down")

    async def give_back(self, account_id: str, lease: str) -> None:
        raise ConnectionError("the fleet's store is down")

    async def renew(self, account_id: str, leases: Sequence[str]) -> None:
        raise ConnectionError("the fleet's store is down")

    async def rest(self, account_id: str, host_url: str, failures: int, until: float) -> None:
        raise ConnectionError("the fleet's store is down")

    async def served(self, account_id: str, host_url: str) -> None:
        raise ConnectionError("the fleet's store is down")

    async def close(self) -> None:
        return None


async def test_with_the_ledger_down_each_process_counts_alone_with_one_warning_a_minute():
    down = DownLedger()
    fleet = FleetLimits(down)
    slots = InflightSlots(2, fleet)
    with capture_logs() as logs:
        assert await slots.acquire("acct-a") and await slots.acquire("acct-a")
        assert not await slots.acquire("acct-a")  # the cap still holds, in this process
        slots.release("acct-a")
        assert await slots.acquire("acct-a")
        await asyncio.sleep(0)
    # The ledger was asked once: after its failure it is left alone a few seconds, not asked per request.
    assert down.calls == 1
    warnings = [line.message for line in logs.lines if line.level == "WARNING"]
    assert len(warnings) == 1, logs.lines
    assert "shared in-flight slots" in warnings[0] and "Q2API_ACCOUNT_MAX_INFLIGHT per worker" in warnings[0]
    await fleet.close()


class Rested:
    """A ledger that answers, with the rests another process began."""

    def __init__(self, rests: Rests) -> None:
        self.rests = rests
        self.given_back: list[str] = []

    async def take(self, account_id: str, lease: str, cap: int) -> Taken:
        return Taken(lease, 1, dict(self.rests))

    async def give_back(self, account_id: str, lease: str) -> None:
        self.given_back.append(lease)

    async def renew(self, account_id: str, leases: Sequence[str]) -> None:
        return None

    async def rest(self, account_id: str, host_url: str, failures: int, until: float) -> None:
        self.rests[host_url] = (failures, until)

    async def served(self, account_id: str, host_url: str) -> None:
        self.rests.pop(host_url, None)

    async def close(self) -> None:
        return None


async def test_a_slot_taken_brings_the_rests_another_process_began_to_the_host_order():
    from q2api.amazonq.host_rests import HostRests
    from q2api.amazonq.hosts import parse_override

    hosts = list(parse_override("https://first.example/,https://second.example/"))
    ledger = Rested({hosts[0].url: (1, time.time() + 60)})
    fleet = FleetLimits(ledger)
    rests = HostRests(fleet=fleet)
    slots = InflightSlots(2, fleet)
    assert rests.order("acct-a", hosts) == hosts  # nothing learnt yet
    assert await slots.acquire("acct-a")
    assert rests.order("acct-a", hosts) == [hosts[1], hosts[0]]
    rests.served("acct-a", hosts[0])  # it served after all: the fleet is told
    slots.release("acct-a")
    await asyncio.sleep(0.05)
    assert ledger.rests == {} and len(ledger.given_back) == 1
    assert rests.order("acct-a", hosts) == hosts
    await fleet.close()
