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


class StoreLedger:
    def __init__(self, database: StoreDatabase) -> None:
        self._database = database
        self._takes_turns = database.kind != "sqlite"

    async def take(self, account_id: str, lease: str, cap: int) -> Taken:
        def take(db: sa.Connection) -> Taken:
            now = time.time()
            if self._takes_turns:
                _take_turn(db, now)
            # Every account's expired slots, not only this one's: those of an account removed since (or
            # never asked for again) would otherwise stay. The table holds the fleet's requests in flight.
            db.execute(sa.delete(account_slots).where(account_slots.c.expires_at <= now))
            in_flight = db.execute(
                sa.select(sa.func.count()).select_from(account_slots).where(account_slots.c.account_id == account_id)
            ).scalar_one()
            taken = None
            if in_flight < cap:
                db.execute(
                    sa.insert(account_slots).values(
                        id=lease, account_id=account_id, expires_at=now + SLOT_LEASE_SECONDS
                    )
                )
                in_flight += 1
                taken = lease
            return Taken(taken, in_flight, _rests(db, account_id, now))

        return await self._database.write(take, durable=False)

    async def give_back(self, account_id: str, lease: str) -> None:
        statement = sa.delete(account_slots).where(account_slots.c.id == lease)
        await self._database.write(lambda db: db.execute(statement), durable=False)

    async def renew(self, account_id: str, leases: Sequence[str]) -> None:
        if not leases:
            return
        until = time.time() + SLOT_LEASE_SECONDS
        statement = sa.update(account_slots).where(account_slots.c.id.in_(list(leases))).values(expires_at=until)
        await self._database.write(lambda db: db.execute(statement), durable=False)

    async def rest(self, account_id: str, host_url: str, failures: int, until: float) -> None:
        where = (host_rests.c.account_id == account_id, host_rests.c.host_url == host_url)

        def rest(db: sa.Connection) -> None:
            if self._takes_turns:  # under the turn, no other write inserts this row meanwhile
                _take_turn(db, time.time())
            changed = db.execute(sa.update(host_rests).where(*where).values(failures=failures, until=until)).rowcount
            if not changed:
                db.execute(
                    sa.insert(host_rests).values(
                        account_id=account_id, host_url=host_url, failures=failures, until=until
                    )
                )
            # Rests long over are nobody's business: each write sweeps them.
            db.execute(sa.delete(host_rests).where(host_rests.c.until < time.time() - 60))

        await self._database.write(rest, durable=False)

    async def served(self, account_id: str, host_url: str) -> None:
        statement = sa.delete(host_rests).where(
            host_rests.c.account_id == account_id, host_rests.c.host_url == host_url
        )
        await self._database.write(lambda db: db.execute(statement), durable=False)

    async def close(self) -> None:
        return None  # the database is the gateway's, closed with it


def _take_turn(db: sa.Connection, now: float) -> None:
    db.execute(sa.update(fleet_turns).where(fleet_turns.c.name == SLOTS_TURN).values(value=now))


def _rests(db: sa.Connection, account_id: str, now: float) -> Rests:
    rows = db.execute(
        sa.select(host_rests.c.host_url, host_rests.c.failures, host_rests.c.until).where(
            host_rests.c.account_id == account_id, host_rests.c.until > now
        )
    ).all()
    return {row.host_url: (int(row.failures), float(row.until)) for row in rows}
