"""The usage ledger's rows past their retention, folded into daily sums (q2api_usage_daily).

Once an hour (the ledger's writer calls it): the replicas take turns on a row of q2api_tenant_meta,
so two of them never fold the same rows twice. Reports count the daily sums as they count the rows.
"""

from __future__ import annotations

import datetime
import time

import sqlalchemy as sa

from q2api.store.database import StoreDatabase
from q2api.tenants.tables import ROLLUP_TURN, tenant_meta, usage, usage_daily


async def roll_up(database: StoreDatabase, retention_days: int, now: float | None = None) -> int:
    """Fold the rows past their retention into daily sums and delete them; how many rows were folded."""
    cutoff_day = datetime.datetime.fromtimestamp(
        (time.time() if now is None else now) - retention_days * 86400, tz=datetime.UTC
    ).strftime("%Y-%m-%d")

    def fold(db: sa.Connection) -> int:
        # Take the turn first: another replica folding the same days waits, then finds them gone.
        db.execute(sa.update(tenant_meta).where(tenant_meta.c.name == ROLLUP_TURN).values(value=time.time()))
        old = usage.c.day < cutoff_day
        groups = (usage.c.day, usage.c.key_label, usage.c.account, usage.c.model, usage.c.door)
        sums = db.execute(
            sa.select(
                *groups,
                sa.func.count().label("requests"),
                sa.func.sum(sa.case((usage.c.status >= 400, 1), else_=0)).label("errors"),
                sa.func.sum(usage.c.input_tokens).label("input_tokens"),
                sa.func.sum(usage.c.output_tokens).label("output_tokens"),
                sa.func.sum(usage.c.cache_read_tokens).label("cache_read_tokens"),
                sa.func.sum(usage.c.cache_write_tokens).label("cache_write_tokens"),
                sa.func.sum(usage.c.credits).label("credits"),
                sa.func.sum(sa.case((usage.c.credits_estimated, 1), else_=0)).label("estimated_requests"),
            )
            .where(old)
            .group_by(*groups)
        ).all()
        if not sums:
            return 0
        db.execute(sa.insert(usage_daily), [dict(row._mapping) for row in sums])
        return int(db.execute(sa.delete(usage).where(old)).rowcount)

    return await database.write(fold)
