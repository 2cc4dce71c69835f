"""The tenants' tables, one SQLAlchemy Core definition for SQLite, PostgreSQL and MySQL/MariaDB alike.

They live beside the account store's tables (q2api.accounts.store_schema) and are migrated by the
same runner (q2api.store.migrations), with a chain of their own, `TENANT_MIGRATIONS`.

    q2api_client_keys      one row per key: its label, the SHA-256 of the key (never the key), its limits
    q2api_key_windows      what a key used in the current window of each limit (requests, tokens, credits)
    q2api_key_leases       one row per request in flight, for the concurrency limit (expires if a process dies)
    q2api_usage            the ledger: one row per request, kept Q2API_USAGE_RETENTION_DAYS
    q2api_usage_daily      the ledger's rows past their retention, summed per day, key, model, account, door
    q2api_tenant_meta      named rows other writers update first, to take turns (the daily roll-up)
"""

from __future__ import annotations

import sqlalchemy as sa

from q2api.store.migrations import Migration, MigrationChain, bookkeeping_table

metadata = sa.MetaData()

ID = sa.String(64)
LABEL = sa.String(255)
TIMESTAMP: sa.Double[float] = sa.Double()  # epoch seconds, as in the account stores
# SQLite gives an automatic row id only to an INTEGER PRIMARY KEY.
ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

client_keys = sa.Table(
    "q2api_client_keys",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("label", LABEL, nullable=False, unique=True),
    sa.Column("key_hash", sa.String(64), nullable=False, unique=True),  # hex SHA-256 of the key
    sa.Column("key_prefix", sa.String(16), nullable=False),  # the key's first characters, to recognise it
    sa.Column("models", sa.Text),  # JSON list of model ids; NULL: every model
    sa.Column("expires_at", TIMESTAMP),
    sa.Column("rpm", sa.Integer),
    sa.Column("tpm", sa.Integer),
    sa.Column("max_concurrent", sa.Integer),
    sa.Column("credits_per_day", sa.Double),
    sa.Column("credits_per_month", sa.Double),
    sa.Column("created_at", TIMESTAMP, nullable=False),
    sa.Column("updated_at", TIMESTAMP, nullable=False),
    sa.Column("revoked_at", TIMESTAMP),
    # Written by every admission first: the row lock makes one key's admissions take turns.
    sa.Column("admitted_at", TIMESTAMP),
)

key_windows = sa.Table(
    "q2api_key_windows",
    metadata,
    sa.Column("key_id", ID, primary_key=True),
    sa.Column("name", sa.String(16), primary_key=True),  # requests, tokens, credits_day, credits_month
    sa.Column("window_start", TIMESTAMP, primary_key=True),
    sa.Column("amount", sa.Double, nullable=False),
)

key_leases = sa.Table(
    "q2api_key_leases",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("key_id", ID, nullable=False, index=True),
    sa.Column("expires_at", TIMESTAMP, nullable=False),
)

usage = sa.Table(
    "q2api_usage",
    metadata,
    sa.Column("id", ROW_ID, primary_key=True, autoincrement=True),
    sa.Column("at", TIMESTAMP, nullable=False, index=True),  # when the request arrived
    # Its UTC day and hour, written with it: grouping by them is then the same SQL on every database.
    sa.Column("day", sa.String(10), nullable=False),  # YYYY-MM-DD
    sa.Column("hour", sa.BigInteger, nullable=False),  # epoch hours
    sa.Column("request_id", sa.String(64), nullable=False),
    sa.Column("key_label", LABEL),  # NULL: an environment key, or an open gateway
    sa.Column("account", LABEL, nullable=False),
    sa.Column("model", LABEL, nullable=False),
    sa.Column("door", sa.String(64), nullable=False),  # the route it came in by
    sa.Column("status", sa.Integer, nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("cache_read_tokens", sa.Integer, nullable=False),
    sa.Column("cache_write_tokens", sa.Integer, nullable=False),
    sa.Column("credits", sa.Double, nullable=False),
    sa.Column("credits_estimated", sa.Boolean, nullable=False),
    sa.Column("ttft_ms", sa.Double),
    sa.Column("duration_ms", sa.Double, nullable=False),
)

usage_daily = sa.Table(
    "q2api_usage_daily",
    metadata,
    sa.Column("id", ROW_ID, primary_key=True, autoincrement=True),
    sa.Column("day", sa.String(10), nullable=False, index=True),  # YYYY-MM-DD, UTC
    sa.Column("key_label", LABEL),
    sa.Column("account", LABEL, nullable=False),
    sa.Column("model", LABEL, nullable=False),
    sa.Column("door", sa.String(64), nullable=False),
    sa.Column("requests", sa.BigInteger, nullable=False),
    sa.Column("errors", sa.BigInteger, nullable=False),
    sa.Column("input_tokens", sa.BigInteger, nullable=False),
    sa.Column("output_tokens", sa.BigInteger, nullable=False),
    sa.Column("cache_read_tokens", sa.BigInteger, nullable=False),
    sa.Column("cache_write_tokens", sa.BigInteger, nullable=False),
    sa.Column("credits", sa.Double, nullable=False),
    sa.Column("estimated_requests", sa.BigInteger, nullable=False),
)

tenant_meta = sa.Table(
    "q2api_tenant_meta",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.Double, nullable=False),
)

ROLLUP_TURN = "usage_rollup"


def create_tenant_tables(connection: sa.Connection) -> None:
    """Create the tenants' tables that are missing (idempotent: a step interrupted on MySQL is re-run)."""
    metadata.create_all(connection, checkfirst=True)
    present = connection.execute(sa.select(tenant_meta.c.name).where(tenant_meta.c.name == ROLLUP_TURN)).first()
    if present is None:
        connection.execute(sa.insert(tenant_meta).values(name=ROLLUP_TURN, value=0.0))


# The tenants' steps, in the account store's migration runner; versions of their own (the chain's
# bookkeeping table is not in `metadata`, which holds the tenants' tables only).
TENANT_MIGRATIONS = MigrationChain(
    "tenants",
    bookkeeping_table("q2api_tenant_schema_migrations", sa.MetaData()),
    (Migration(1, "client keys, their counters and the usage ledger", create_tenant_tables),),
)
