"""The fleet's tables, one SQLAlchemy Core definition for SQLite, PostgreSQL and MySQL/MariaDB alike,
beside the account store's and the tenants' (migrated by the same runner, with a chain of their own).

    q2api_account_slots   one row per request in flight at an account (a lease: expires unless renewed)
    q2api_host_rests      one row per host resting for an account, until an epoch time
    q2api_fleet_turns     one row every fleet write updates first, to take turns
"""

from __future__ import annotations

import sqlalchemy as sa

from q2api.store.migrations import Migration, MigrationChain, bookkeeping_table

metadata = sa.MetaData()

ID = sa.String(64)
TIMESTAMP: sa.Double[float] = sa.Double()  # epoch seconds, as in the other stores
SLOTS_TURN = "account_slots"

account_slots = sa.Table(
    "q2api_account_slots",
    metadata,
    sa.Column("id", ID, primary_key=True),  # the lease
    sa.Column("account_id", ID, nullable=False, index=True),
    sa.Column("expires_at", TIMESTAMP, nullable=False),
)

host_rests = sa.Table(
    "q2api_host_rests",
    metadata,
    sa.Column("account_id", ID, primary_key=True),
    sa.Column("host_url", sa.String(512), primary_key=True),
    sa.Column("failures", sa.Integer, nullable=False),  # in a row
    sa.Column("until", TIMESTAMP, nullable=False),
)

fleet_turns = sa.Table(
    "q2api_fleet_turns",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.Double, nullable=False),
)


def create_fleet_tables(connection: sa.Connection) -> None:
    """Create the fleet's tables that are missing (idempotent: a step interrupted on MySQL is re-run)."""
    metadata.create_all(connection, checkfirst=True)
    present = connection.execute(sa.select(fleet_turns.c.name).where(fleet_turns.c.name == SLOTS_TURN)).first()
    if present is None:
        connection.execute(sa.insert(fleet_turns).values(name=SLOTS_TURN, value=0.0))


FLEET_MIGRATIONS = MigrationChain(
    "fleet",
    bookkeeping_table("q2api_fleet_schema_migrations", sa.MetaData()),
    (Migration(1, "accounts' in-flight slots and hosts' rests, shared by the fleet", create_fleet_tables),),
)
