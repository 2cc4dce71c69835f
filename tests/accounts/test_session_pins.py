"""Session pins in each place they are kept: the store's database (SQLite, PostgreSQL, MariaDB) and Redis."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import redis
import sqlalchemy as sa

from q2api.accounts.redis_session_pins import RedisSessionPins
from q2api.accounts.session_affinity import SessionAffinity, TurnKey
from q2api.accounts.session_pins import SESSION_PIN_MIGRATIONS, Pin, StoreSessionPins, session_pins
from q2api.store.opening import opened_database
from tests.support.tenant_stores import DATABASE_KINDS, database_url_for, scratch_redis

PLACES = (*DATABASE_KINDS, "redis")
KEY = "0f" * 16


@pytest.fixture(params=PLACES)
async def pins_of(request, tmp_path) -> AsyncIterator:
    """A factory: the pins kept in the test's place, with a given idle time (several share one place)."""
    if request.param == "redis":
        with scratch_redis() as place:
            made: list[RedisSessionPins] = []

            def redis_pins(idle: int = 3600) -> RedisSessionPins:
                made.append(RedisSessionPins(place.url, idle, place.prefix))
                return made[-1]

            redis_pins.place = place  # type: ignore[attr-defined]
            yield redis_pins
            for pins in made:
                await pins.close()
        return
    with database_url_for(request.param, tmp_path) as url:
        async with opened_database(url, tmp_path, (SESSION_PIN_MIGRATIONS,)) as database:

            def store_pins(idle: int = 3600) -> StoreSessionPins:
                return StoreSessionPins(database, idle)

            store_pins.database = database  # type: ignore[attr-defined]
            yield store_pins


async def test_a_pin_is_found_by_every_worker_and_follows_a_move(pins_of):
    first, second = pins_of(), pins_of()  # two workers (or replicas) on one place
    assert await first.find(KEY) is None
    await first.keep(KEY, Pin("account-a"), None)
    assert await second.find(KEY) == Pin("account-a")
    await second.keep(KEY, Pin("account-b", foreign_history=6), Pin("account-a"))
    assert await first.find(KEY) == Pin("account-b", foreign_history=6)
    assert await first.find("1e" * 16) is None  # another conversation has no pin


async def test_two_workers_pinning_one_new_conversation_at_once_both_succeed(pins_of):
    workers = [pins_of() for _ in range(4)]
    await asyncio.gather(*(pins.keep(KEY, Pin(f"account-{n}"), None) for n, pins in enumerate(workers)))
    found = await workers[0].find(KEY)
    assert found is not None and found.account_id in {f"account-{n}" for n in range(4)}


@pytest.mark.slow  # waits for the idle time to pass
async def test_an_idle_pin_expires(pins_of):
    pins = pins_of(1)
    await pins.keep(KEY, Pin("account-a"), None)
    assert (await pins.find(KEY)).account_id == "account-a"
    await asyncio.sleep(2.2)
    assert await pins.find(KEY) is None


@pytest.mark.slow  # turns spaced over more than the idle time
async def test_a_pin_in_use_is_renewed_and_outlives_its_idle_time(pins_of):
    pins = pins_of(2)
    await pins.keep(KEY, Pin("account-a"), None)
    for _ in range(4):  # 3.2 s of turns, each within the 2 s idle time of the last
        await asyncio.sleep(0.8)
        found = await pins.find(KEY)
        assert found is not None and found.account_id == "account-a"
        await pins.keep(KEY, Pin("account-a"), found)


async def test_a_kept_pin_is_not_written_again_until_its_idle_time_is_worth_renewing(pins_of, monkeypatch):
    pins = pins_of(3600)
    await pins.keep(KEY, Pin("account-a"), None)
    found = await pins.find(KEY)
    assert found == Pin("account-a", stale=False)
    if isinstance(pins, StoreSessionPins):
        later = time.time() + 400  # past a tenth of the idle time: due for renewal
        monkeypatch.setattr(time, "time", lambda: later)
        assert await pins.find(KEY) == Pin("account-a", stale=True)


async def test_only_a_digest_and_an_account_id_are_stored(pins_of):
    pins = pins_of()
    await pins.keep(KEY, Pin("account-a"), None)
    if isinstance(pins, RedisSessionPins):
        client = redis.Redis.from_url(pins_of.place.url)
        try:
            keys = [key.decode() for key in client.scan_iter(match=f"{pins_of.place.prefix}:*")]
        finally:
            client.close()
        assert keys == [f"{pins_of.place.prefix}:pins:{KEY}"]
        return
    rows = await pins_of.database.read(lambda db: [tuple(row) for row in db.execute(sa.select(session_pins))])
    assert [(key, account) for key, account, _foreign, _expires in rows] == [(KEY, "account-a")]


class _DeadPins:
    def __init__(self) -> None:
        self.asked = 0

    async def find(self, key: str) -> Pin | None:
        self.asked += 1
        raise ConnectionError("refused")

    async def keep(self, key: str, pin: Pin, found: Pin | None) -> None:
        raise ConnectionError("refused")

    async def close(self) -> None:
        return None


class _SilentPins(_DeadPins):
    async def find(self, key: str) -> Pin | None:
        self.asked += 1
        await asyncio.sleep(3600)
        return None


@pytest.mark.parametrize("kind", [_DeadPins, _SilentPins], ids=["failing", "silent"])
async def test_a_pin_store_that_fails_or_hangs_is_a_turn_without_affinity(kind, monkeypatch, log_lines):
    pins = kind()
    monkeypatch.setattr("q2api.accounts.session_affinity.FIND_DEADLINE", 0.2)
    affinity = SessionAffinity(pins)
    turn = affinity.turn(lambda: TurnKey(KEY))
    assert await turn.pinned() is None
    turn.served("account-a", "alpha", None, 0)  # its write fails in the background: no exception here
    # The next turns do not ask a store that just failed (a hanging one would cost each turn the deadline).
    assert await affinity.turn(lambda: TurnKey(KEY)).pinned() is None
    assert await affinity.turn(lambda: TurnKey(KEY)).pinned() is None
    assert pins.asked == 1
    await affinity.close()
    assert sum("the pin store did not answer" in line for line in log_lines) == 1
