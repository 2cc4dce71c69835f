"""The table of stored Responses API conversations, `q2api_responses`, in the store's database.

It is created by step 4 of the account store's chain (q2api.accounts.store_schema.STORE_MIGRATIONS),
which shipped before this room had a home of its own; a released step never moves.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

metadata = sa.MetaData()

ID = sa.String(64)  # a response id (`resp_…`), as long as an account id may be
TIMESTAMP: sa.Double[float] = sa.Double()  # epoch seconds

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
    sa.Column("record", sa.Text().with_variant(mysql.LONGTEXT(), "mysql"), nullable=False),
)
