"""The fleet's slots and rests in the store's tables (SQLite, PostgreSQL or MySQL).

Every write on a shared database first updates one row (`q2api_fleet_turns`): its lock makes the
fleet's writes take turns (a row lock on PostgreSQL and MySQL), so two replicas counting an account's
slots at once cannot both see the last one free. SQLite needs no such row: its writes take the file's
write lock up front (BEGIN IMMEDIATE, q2api.store.sqlite_database), which already makes them take turns. One row for every account: each write is
a handful of small statements, and a deployment's requests per second are far below what one row's
turns allow. Times are epoch seconds of the writing process's clock, as for the client keys' leases.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import sqlalchemy as sa

from q2api.fleet.ledger import SLOT_LEASE_SECONDS, Rests, Taken
from q2api.fleet.tables import SLOTS_TURN, account_slots, fleet_turns, host_rests
from q2api.store.database import StoreDatabase

# Built once: SQLAlchemy spends more CPU building a statement and its cache key than SQLite spends
# running it, and a take runs on every request (as for the client keys' counters, q2api.tenants.counters;
# a bound parameter is not named after a column its insert or update writes).
_TAKE_TURN = sa.update(fleet_turns).where(fleet_turns.c.name == SLOTS_TURN).values(value=sa.bindparam("at"))
# Every account's expired slots, not only this one's: those of an account removed since (or never asked
# for again) would otherwise stay. The table holds the fleet's requests in flight.
_FORGET_EXPIRED = sa.delete(account_slots).where(account_slots.c.expires_at <= sa.bindparam("at"))
_IN_FLIGHT = (
    sa.select(sa.func.count()).select_from(account_slots).where(account_slots.c.account_id == sa.bindparam("account"))
)
_TAKE_SLOT = sa.insert(account_slots).values(
    id=sa.bindparam("lease"), account_id=sa.bindparam("account"), expires_at=sa.bindparam("until")
)
_GIVE_BACK = sa.delete(account_slots).where(account_slots.c.id == sa.bindparam("lease"))
_RESTS = sa.select(host_rests.c.host_url, host_rests.c.failures, host_rests.c.until).where(
    host_rests.c.account_id == sa.bindparam("account"), host_rests.c.until > sa.bindparam("at")
)
_THE_REST = (host_rests.c.account_id == sa.bindparam("account"), host_rests.c.host_url == sa.bindparam("host"))
_SET_REST = (
    sa.update(host_rests)
    .where(*_THE_REST)
    .values(failures=sa.bindparam("failure_count"), until=sa.bindparam("rest_until"))
)
_ADD_REST = sa.insert(host_rests).values(
    account_id=sa.bindparam("account"),
    host_url=sa.bindparam("host"),
    failures=sa.bindparam("failure_count"),
    until=sa.bindparam("rest_until"),
)
_END_REST = sa.delete(host_rests).where(*_THE_REST)
_FORGET_OLD_RESTS = sa.delete(host_rests).where(host_rests.c.until < sa.bindparam("before"))


class StoreLedger:
    def __init__(self, database: StoreDatabase) -> None:
        self._database = database
        self._takes_turns = database.kind != "sqlite"

    async def take(self, account_id: str, lease: str, cap: int) -> Taken:
        def take(db: sa.Connection) -> Taken:
            now = time.time()
            if self._takes_turns:
                db.execute(_TAKE_TURN, {"at": now})
            db.execute(_FORGET_EXPIRED, {"at": now})
            in_flight = db.execute(_IN_FLIGHT, {"account": account_id}).scalar_one()
            taken = None
            if in_flight < cap:
                db.execute(_TAKE_SLOT, {"lease": lease, "account": account_id, "until": now + SLOT_LEASE_SECONDS})
                in_flight += 1
                taken = lease
            rows = db.execute(_RESTS, {"account": account_id, "at": now}).all()
            rests: Rests = {row.host_url: (int(row.failures), float(row.until)) for row in rows}
            return Taken(taken, in_flight, rests)

        return await self._database.write(take, durable=False)

    async def give_back(self, account_id: str, lease: str) -> None:
        await self._database.write(lambda db: db.execute(_GIVE_BACK, {"lease": lease}), durable=False)

    async def renew(self, account_id: str, leases: Sequence[str]) -> None:
        if not leases:
            return
        until = time.time() + SLOT_LEASE_SECONDS
        statement = sa.update(account_slots).where(account_slots.c.id.in_(list(leases))).values(expires_at=until)
        await self._database.write(lambda db: db.execute(statement), durable=False)  # every 2 s, not per request

    async def rest(self, account_id: str, host_url: str, failures: int, until: float) -> None:
        the_rest = {"account": account_id, "host": host_url, "failure_count": failures, "rest_until": until}

        def rest(db: sa.Connection) -> None:
            now = time.time()
            if self._takes_turns:  # under the turn, no other write inserts this row meanwhile
                db.execute(_TAKE_TURN, {"at": now})
            if not db.execute(_SET_REST, the_rest).rowcount:
                db.execute(_ADD_REST, the_rest)
            # Rests long over are nobody's business: each write sweeps them.
            db.execute(_FORGET_OLD_RESTS, {"before": now - 60})

        await self._database.write(rest, durable=False)

    async def served(self, account_id: str, host_url: str) -> None:
        ended = {"account": account_id, "host": host_url}
        await self._database.write(lambda db: db.execute(_END_REST, ended), durable=False)

    async def close(self) -> None:
        return None  # the database is the gateway's, closed with it
