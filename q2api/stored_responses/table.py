"""The table of stored Responses API conversations, `q2api_responses`, in the store's database.

It is created by step 4 of the account store's chain (q2api.accounts.store_schema.STORE_MIGRATIONS),
which shipped before this room had a home of its own; a released step never moves.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine.interfaces import Dialect

metadata = sa.MetaData()

ID = sa.String(64)  # a response id (`resp_…`), as long as an account id may be
TIMESTAMP: sa.Double[float] = sa.Double()  # epoch seconds


class LongText(sa.types.TypeDecorator[str]):
    """TEXT, and LONGTEXT on MySQL, whose TEXT stops at 64 KiB (what `Text().with_variant(mysql.LONGTEXT(),
    "mysql")` says), with the MySQL dialect imported only when a MySQL database asks for it: a worker
    on the SQLite store would otherwise carry its ~1 MB for one column (BENCHMARKS.md, issue 33)."""

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "mysql":
            from sqlalchemy.dialects.mysql import LONGTEXT

            return LONGTEXT()
        return self.impl_instance


# One row per response: its input items and `response` object as JSON text. MySQL's TEXT stops at
# 64 KiB, and a Codex turn is larger.
responses = sa.Table(
    "q2api_responses",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("owner", sa.String(64), nullable=False),
    sa.Column("previous_response_id", ID),
    sa.Column("created_at", TIMESTAMP, nullable=False),
    sa.Column("expires_at", TIMESTAMP, nullable=False, index=True),
    sa.Column("model", sa.String(255), nullable=False),
    sa.Column("record", LongText(), nullable=False),
)
