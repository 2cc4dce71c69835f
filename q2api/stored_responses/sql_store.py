"""Stored Responses API conversations beside the accounts, in the store's own database (implements `ResponseStore`).

The `q2api_responses` table (store_schema.py) on the account store's connections:
every worker and replica reads what any of them stored, so a `previous_response_id`
conversation goes on whichever one the next request reaches. A write, once begun,
commits whole even if its caller is cancelled.

A conversation is read in one statement, a recursive common table expression that follows
`previous_response_id` from the newest response back (SQLite, PostgreSQL and MySQL 8 / MariaDB
10.2 have them): a continuation at depth 300 cost 300 round trips before. MySQL and MariaDB stop a
recursion at 1,000 rows unless told otherwise (MySQL with an error, MariaDB silently), so the
connection is told the store's own bound first (`cte_max_recursion_depth`,
`max_recursive_iterations`).
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from q2api.store.database import StoreDatabase, affected_rows, first_row
from q2api.stored_responses import table as tables
from q2api.stored_responses.store import PurgeClock, StoredResponse, stored_response


class SqlResponseStore:
    def __init__(self, db: StoreDatabase) -> None:
        """`db`: the account store's database, already migrated."""
        self._db = db
        self._purge = PurgeClock()

    async def save(self, response: StoredResponse) -> None:
        table = tables.responses
        row = {
            "id": response.id,
            "owner": response.owner,
            "previous_response_id": response.previous_response_id,
            "created_at": response.created_at,
            "expires_at": response.expires_at,
            "model": response.model,
            "record": response.record(),
        }
        purge = self._purge.due()

        def write(db: sa.Connection) -> None:
            db.execute(sa.insert(table).values(**row))
            if purge:
                db.execute(sa.delete(table).where(table.c.expires_at <= time.time()))

        await self._db.write(write)

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        table = tables.responses
        query = sa.select(table).where(
            table.c.id == response_id, table.c.owner == owner, table.c.expires_at > time.time()
        )
        row = await self._db.read(lambda db: first_row(db, query))
        return _stored(row) if row is not None else None

    async def chain(self, response_id: str, owner: str, limit: int) -> list[StoredResponse]:
        parameters = {"response_id": response_id, "owner": owner, "now": time.time(), "deeper_than": limit - 1}

        def read(db: sa.Connection) -> list[sa.Row[Any]]:
            if db.dialect.name == "mysql":
                bound = (
                    "max_recursive_iterations"
                    if getattr(db.dialect, "is_mariadb", False)
                    else "cte_max_recursion_depth"
                )
                db.exec_driver_sql(f"SET SESSION {bound} = {int(limit) + 1}")
            return list(db.execute(_CHAIN, parameters).all())

        rows = await self._db.read(read)
        return [_stored(row) for row in rows]

    async def delete(self, response_id: str, owner: str) -> bool:
        table = tables.responses
        statement = sa.delete(table).where(table.c.id == response_id, table.c.owner == owner)
        return await self._db.write(lambda db: affected_rows(db, statement)) > 0

    async def purge_expired(self) -> int:
        table = tables.responses
        statement = sa.delete(table).where(table.c.expires_at <= time.time())
        return await self._db.write(lambda db: affected_rows(db, statement))


def _stored(row: sa.Row[Any]) -> StoredResponse:
    return stored_response(
        response_id=row.id,
        owner=row.owner,
        previous_response_id=row.previous_response_id,
        created_at=row.created_at,
        expires_at=row.expires_at,
        model=row.model,
        record=row.record,
    )


def _chain_query() -> sa.Select[Any]:
    """A response and the ones it continues, newest first (`depth` 0, 1, …), each still live and the
    owner's, at most `deeper_than` + 1 of them: one recursive query, built once."""
    table = tables.responses
    live = (table.c.owner == sa.bindparam("owner"), table.c.expires_at > sa.bindparam("now"))
    walk = (
        sa.select(table.c.id, table.c.previous_response_id, sa.literal(0).label("depth"))
        .where(table.c.id == sa.bindparam("response_id"), *live)
        .cte("conversation", recursive=True)
    )
    earlier = (
        sa.select(table.c.id, table.c.previous_response_id, (walk.c.depth + 1).label("depth"))
        .select_from(table.join(walk, table.c.id == walk.c.previous_response_id))
        .where(walk.c.depth < sa.bindparam("deeper_than"), *live)
    )
    walk = walk.union_all(earlier)
    return sa.select(table).select_from(table.join(walk, table.c.id == walk.c.id)).order_by(walk.c.depth)


_CHAIN = _chain_query()
