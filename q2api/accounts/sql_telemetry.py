"""Request counters and cool-downs in the store's database (implements `TelemetryStore`).

Each worker counts in memory and adds its counts every reloader tick (`requests = requests + n`),
so the workers' counts add up instead of overwriting each other; a cool-down begun anywhere rests
the account everywhere, the longest one winning.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import sqlalchemy as sa

from q2api.accounts import store_schema as tables
from q2api.accounts.records import AccountRest, AccountStats, StatsDelta
from q2api.store.database import StoreDatabase, all_rows, first_row


class SqlTelemetry:
    _db: StoreDatabase

    async def add_stats(self, pending: Mapping[str, StatsDelta]) -> None:
        if not pending:
            return
        upsert = _upsert_for(self._db.kind)
        greatest = sa.func.max if self._db.kind == "sqlite" else sa.func.greatest  # SQLite's max() of two is scalar

        def merge(current: Any, new: Any) -> dict[str, Any]:
            return {
                "requests": current.requests + new.requests,
                "failures": current.failures + new.failures,
                "last_error": sa.func.coalesce(new.last_error, current.last_error),
                "last_used_at": greatest(
                    sa.func.coalesce(current.last_used_at, 0), sa.func.coalesce(new.last_used_at, 0)
                ),
            }

        def write(db: sa.Connection) -> None:
            wanted = sa.select(tables.accounts.c.id).where(tables.accounts.c.id.in_(list(pending)))
            known = set(db.scalars(wanted))
            for account_id in sorted(known):  # one order for every writer: no deadlock between them
                delta = pending[account_id]
                row: dict[str, Any] = {"account_id": account_id, "requests": delta.requests, "failures": delta.failures}
                row |= {"last_error": delta.last_error, "last_used_at": delta.last_used_at}
                db.execute(upsert(tables.account_stats, row, merge))

        await self._db.write(write)

    async def read_stats(self) -> dict[str, AccountStats]:
        rows = await self._db.read(lambda db: all_rows(db, sa.select(tables.account_stats)))
        return {
            row.account_id: AccountStats(row.requests, row.failures, row.last_error, row.last_used_at) for row in rows
        }

    async def add_rests(self, rests: Mapping[str, AccountRest]) -> None:
        """Record account cool-downs (the longest one wins), so every worker and replica rests the account too."""
        table = tables.account_rests

        def write(db: sa.Connection) -> None:
            for account_id in sorted(rests):
                rest = rests[account_id]
                db.execute(sa.delete(table).where(table.c.account_id == account_id, table.c.until < rest.until))
                if first_row(db, sa.select(table.c.until).where(table.c.account_id == account_id)) is None:
                    db.execute(sa.insert(table).values(account_id=account_id, until=rest.until, reason=rest.reason))

        if rests:
            await self._db.write(write)

    async def clear_rests(self, account_ids: Collection[str]) -> None:
        table = tables.account_rests
        statement = sa.delete(table).where(table.c.account_id.in_(sorted(account_ids)))
        if account_ids:
            await self._db.write(lambda db: db.execute(statement))

    async def read_rests(self) -> dict[str, AccountRest]:
        table = tables.account_rests
        rows = await self._db.read(lambda db: all_rows(db, sa.select(table).where(table.c.until > time.time())))
        return {row.account_id: AccountRest(row.until, row.reason) for row in rows}


Merge = Callable[[Any, Any], dict[str, Any]]


def _upsert_for(kind: str) -> Callable[[sa.Table, dict[str, Any], Merge], sa.Executable]:
    """Insert `row`, or merge it into the row with its key: each database's own statement for it."""

    def upsert(table: sa.Table, row: dict[str, Any], merge: Merge) -> sa.Executable:
        keys = [column.name for column in table.primary_key]
        if kind == "mysql":
            from sqlalchemy.dialects import mysql

            mysql_insert = mysql.insert(table).values(**row)
            return mysql_insert.on_duplicate_key_update(**merge(table.c, mysql_insert.inserted))
        if kind == "postgresql":
            from sqlalchemy.dialects import postgresql

            pg_insert = postgresql.insert(table).values(**row)
            return pg_insert.on_conflict_do_update(index_elements=keys, set_=merge(table.c, pg_insert.excluded))
        from sqlalchemy.dialects import sqlite

        sqlite_insert = sqlite.insert(table).values(**row)
        return sqlite_insert.on_conflict_do_update(index_elements=keys, set_=merge(table.c, sqlite_insert.excluded))

    return upsert
