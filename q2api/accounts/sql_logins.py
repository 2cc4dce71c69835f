"""Device-code logins under way, in the store's database (implements `LoginStore`).

The worker that starts a login polls the token service and records the outcome here, so any
worker (or replica) can answer "is it done yet?".
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from q2api.accounts import store_schema as tables
from q2api.accounts.records import LOGIN_RECORD_LIFETIME, LoginRecord, LoginStatus, login_record
from q2api.store.database import StoreDatabase, affected_rows, first_row


class SqlLogins:
    _db: StoreDatabase

    async def record_login(self, login_id: str, label: str, method: str, expires_in: float) -> None:
        now = time.time()
        record: dict[str, Any] = {"id": login_id, "label": label, "method": method, "status": LoginStatus.PENDING.value}
        record |= {"expires_at": now + expires_in, "created_at": now}

        def write(db: sa.Connection) -> None:
            db.execute(sa.insert(tables.logins).values(**record))
            # Keep the table small: logins older than a day are of no use to anyone.
            db.execute(sa.delete(tables.logins).where(tables.logins.c.created_at < now - LOGIN_RECORD_LIFETIME))

        await self._db.write(write)

    async def finish_login(
        self, login_id: str, status: LoginStatus, account_id: str | None = None, detail: str | None = None
    ) -> None:
        statement = sa.update(tables.logins).where(tables.logins.c.id == login_id)
        changes = {"status": status.value, "account_id": account_id, "detail": detail}
        await self._db.write(lambda db: db.execute(statement.values(**changes)))

    async def cancel_login(self, login_id: str, detail: str) -> bool:
        logins = tables.logins
        statement = (
            sa.update(logins)
            .where(logins.c.id == login_id, logins.c.status == LoginStatus.PENDING.value)
            .values(status=LoginStatus.CANCELLED.value, detail=detail)
        )
        return await self._db.write(lambda db: affected_rows(db, statement) > 0)

    async def read_login(self, login_id: str) -> LoginRecord | None:
        query = sa.select(tables.logins).where(tables.logins.c.id == login_id)
        row = await self._db.read(lambda db: first_row(db, query))
        if row is None:
            return None
        return login_record(row.id, row.label, row.method, row.status, row.account_id, row.detail, row.expires_at)
