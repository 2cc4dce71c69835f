"""What each key has used in its current windows, and its requests in flight: the one protocol the
limits are checked through, kept in Redis (q2api.tenants.redis_counters) or in the store (here).

Both keep the same promise: an admission is checked and counted in one atomic step, so that two
workers (or replicas) admitting the same key at once can never both take the last request of a window.
In the store, that step is one transaction that first updates the key's own row, which makes the
key's admissions take turns (a row lock on PostgreSQL and MySQL, the write lock on SQLite).
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Sequence
from typing import Protocol

import sqlalchemy as sa

from q2api.store.database import StoreDatabase
from q2api.tenants.tables import client_keys, key_leases, key_windows
from q2api.tenants.windows import Window

# A request in flight holds its place this long after it took it or last renewed it: the gate renews
# the places of its requests still running every LEASE_RENEW_SECONDS, so a worker that dies (and
# renews nothing more) blocks the key's places for LEASE_SECONDS at most.
LEASE_SECONDS = 60.0
LEASE_RENEW_SECONDS = 20.0
CONCURRENCY_RETRY_SECONDS = 1.0  # the retry-after of a request refused for the key's concurrency


class CountersLate(Exception):
    """The counters answered too late for the request that asked (they changed nothing for it)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Refused:
    window: Window | None  # None: the key's concurrency
    used: float  # what was used in that window (or requests in flight)
    retry_after: float  # seconds


@dataclasses.dataclass(frozen=True, slots=True)
class Admitted:
    lease: str | None  # the request's place in flight, when the key has a concurrency limit
    used: dict[str, float]  # window name → used, this request counted


WindowRef = tuple[str, float, float]  # name, start, end
Addition = tuple[Sequence[WindowRef], float]  # windows, the amount to add to each


class Counters(Protocol):
    async def admit(
        self, key_id: str, windows: Sequence[Window], concurrency: int | None, now: float
    ) -> Admitted | Refused: ...

    async def settle(self, key_id: str, lease: str | None, additions: Sequence[Addition]) -> None:
        """A request is over: give its place in flight back (`lease`), and count what became known
        only then (its real tokens, its credits), `amount` more in each of the windows, in one step."""
        ...

    async def renew(self, key_id: str, leases: Sequence[str]) -> None:
        """The places in flight `leases` of `key_id` (those still there) are held LEASE_SECONDS from now."""
        ...

    async def used(self, key_id: str, windows: Sequence[WindowRef]) -> dict[str, float]: ...

    async def close(self) -> None: ...


def new_lease() -> str:
    return "lease_" + secrets.token_hex(8)


class StoreCounters:
    """The counters in the store's tables (SQLite, PostgreSQL or MySQL)."""

    def __init__(self, database: StoreDatabase) -> None:
        self._database = database

    async def admit(
        self, key_id: str, windows: Sequence[Window], concurrency: int | None, now: float
    ) -> Admitted | Refused:
        def admit(db: sa.Connection) -> Admitted | Refused:
            _take_turn(db, key_id, now)
            used: dict[str, float] = {}
            for window in windows:
                amount = _amount(db, key_id, window.name, window.start)
                if window.refuses(amount):
                    return Refused(window, amount, window.end - now)
                used[window.name] = amount
            lease = None
            if concurrency is not None:
                db.execute(_DROP_EXPIRED_LEASES, {"key": key_id, "at": now})
                in_flight = db.execute(_LEASES_IN_FLIGHT, {"key": key_id}).scalar_one()
                if in_flight >= concurrency:
                    return Refused(None, float(in_flight), CONCURRENCY_RETRY_SECONDS)
                lease = new_lease()
                db.execute(_TAKE_LEASE, {"lease": lease, "key": key_id, "until": now + LEASE_SECONDS})
            for window in windows:
                if window.cost:
                    _add(db, key_id, window.name, window.start, window.cost)
                    used[window.name] += window.cost
                # Earlier windows of the same limit are over: nobody reads them again.
                db.execute(_DROP_EARLIER_WINDOWS, {"key": key_id, "limit_name": window.name, "window": window.start})
            return Admitted(lease, used)

        return await self._database.write(admit, durable=False)

    async def settle(self, key_id: str, lease: str | None, additions: Sequence[Addition]) -> None:
        counted = [(windows, amount) for windows, amount in additions if amount]
        if lease is None and not counted:
            return

        def settle(db: sa.Connection) -> None:
            if counted:
                _take_turn(db, key_id, None)
                for windows, amount in counted:
                    for name, start, _end in windows:
                        _add(db, key_id, name, start, amount)
            if lease is not None:
                db.execute(_GIVE_LEASE_BACK, {"lease": lease})

        await self._database.write(settle, durable=False)

    async def renew(self, key_id: str, leases: Sequence[str]) -> None:
        if not leases:
            return
        until = time.time() + LEASE_SECONDS
        statement = sa.update(key_leases).where(key_leases.c.id.in_(list(leases))).values(expires_at=until)
        await self._database.write(lambda db: db.execute(statement), durable=False)

    async def used(self, key_id: str, windows: Sequence[WindowRef]) -> dict[str, float]:
        def select(db: sa.Connection) -> dict[str, float]:
            return {name: _amount(db, key_id, name, start) for name, start, _end in windows}

        return await self._database.read(select)

    async def close(self) -> None:
        return None  # the database is the key store's, closed with it


# Every statement of an admission and its settling, built once with bound parameters. An admission runs
# a dozen of them; built anew on every call, SQLAlchemy spent more CPU building each statement and
# computing its cache key than the database spent running it (BENCHMARKS.md, issue 33: ~3.7 ms of CPU
# per admission and settling on SQLite). The statement objects are immutable: sharing them between
# threads and databases is what SQLAlchemy's compiled cache expects. (A bound parameter may not be named
# after a column of the table an insert or update writes: hence `key`, `window`, `add`.)
_KEY_ID = sa.bindparam("key", type_=client_keys.c.id.type)
_TAKE_TURN_AT = sa.update(client_keys).where(client_keys.c.id == _KEY_ID).values(admitted_at=sa.bindparam("at"))
_TAKE_TURN = sa.update(client_keys).where(client_keys.c.id == _KEY_ID).values(admitted_at=client_keys.c.admitted_at)
_WINDOW = (
    key_windows.c.key_id == sa.bindparam("key"),
    key_windows.c.name == sa.bindparam("limit_name"),
    key_windows.c.window_start == sa.bindparam("window"),
)
_AMOUNT = sa.select(key_windows.c.amount).where(*_WINDOW)
_ADD = sa.update(key_windows).where(*_WINDOW).values(amount=key_windows.c.amount + sa.bindparam("add"))
_INSERT_WINDOW = sa.insert(key_windows).values(
    key_id=sa.bindparam("key"),
    name=sa.bindparam("limit_name"),
    window_start=sa.bindparam("window"),
    amount=sa.bindparam("add"),
)
_DROP_EARLIER_WINDOWS = sa.delete(key_windows).where(
    key_windows.c.key_id == sa.bindparam("key"),
    key_windows.c.name == sa.bindparam("limit_name"),
    key_windows.c.window_start < sa.bindparam("window"),
)
_DROP_EXPIRED_LEASES = sa.delete(key_leases).where(
    key_leases.c.key_id == sa.bindparam("key"), key_leases.c.expires_at <= sa.bindparam("at")
)
_LEASES_IN_FLIGHT = sa.select(sa.func.count()).select_from(key_leases).where(key_leases.c.key_id == sa.bindparam("key"))
_TAKE_LEASE = sa.insert(key_leases).values(
    id=sa.bindparam("lease"), key_id=sa.bindparam("key"), expires_at=sa.bindparam("until")
)
_GIVE_LEASE_BACK = sa.delete(key_leases).where(key_leases.c.id == sa.bindparam("lease"))


def _take_turn(db: sa.Connection, key_id: str, now: float | None) -> None:
    """Update the key's row first: its lock makes this key's counting transactions take turns."""
    if now is None:
        db.execute(_TAKE_TURN, {"key": key_id})
    else:
        db.execute(_TAKE_TURN_AT, {"key": key_id, "at": now})


def _amount(db: sa.Connection, key_id: str, name: str, start: float) -> float:
    row = db.execute(_AMOUNT, {"key": key_id, "limit_name": name, "window": start}).first()
    return float(row.amount) if row is not None else 0.0


def _add(db: sa.Connection, key_id: str, name: str, start: float, amount: float) -> None:
    # Under the key's turn (`_take_turn`): no other transaction inserts this row meanwhile.
    parameters = {"key": key_id, "limit_name": name, "window": start, "add": amount}
    changed = db.execute(_ADD, parameters).rowcount
    if not changed:
        db.execute(_INSERT_WINDOW, parameters)
