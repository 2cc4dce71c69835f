"""Stored Responses API conversations beside the accounts, in the store's own database (implements `ResponseStore`).

The `q2api_responses` table (store_schema.py) on the account store's connections:
every worker and replica reads what any of them stored, so a `previous_response_id`
conversation goes on whichever one the next request reaches. A write, once begun,
commits whole even if its caller is cancelled.
"""

from __future__ import annotations

import time

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
        if row is None:
            return None
        return stored_response(
            response_id=row.id,
            owner=row.owner,
            previous_response_id=row.previous_response_id,
            created_at=row.created_at,
            expires_at=row.expires_at,
            model=row.model,
            record=row.record,
        )

    async def delete(self, response_id: str, owner: str) -> bool:
        table = tables.responses
        statement = sa.delete(table).where(table.c.id == response_id, table.c.owner == owner)
        return await self._db.write(lambda db: affected_rows(db, statement)) > 0

    async def purge_expired(self) -> int:
        table = tables.responses
        statement = sa.delete(table).where(table.c.expires_at <= time.time())
        return await self._db.write(lambda db: affected_rows(db, statement))
