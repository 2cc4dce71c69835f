"""The shared store's tables (PostgreSQL and MySQL/MariaDB alike) and their migrations.

Tables carry a `q2api_` prefix, so the database may be shared with other
applications. `q2api_schema_migrations` lists the versions applied; at start-up
each replica applies the missing ones under a database lock, so replicas that
start together neither race nor apply a step twice (MySQL's DDL is not
transactional: the lock, not a transaction, keeps it whole). A store written by
a newer q2api is refused rather than misread.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from q2api.accounts.database_locks import DatabaseLocks
from q2api.accounts.field_limits import CLIENT_ID_CHARS, ID_CHARS, LABEL_CHARS, PROFILE_ARN_CHARS, REGION_CHARS

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

metadata = sa.MetaData()

ID = sa.String(ID_CHARS)
TIMESTAMP: sa.Double[float] = sa.Double()  # epoch seconds, as in the SQLite store

accounts = sa.Table(
    "q2api_accounts",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("label", sa.String(LABEL_CHARS), nullable=False),
    sa.Column("auth_method", sa.String(16), nullable=False),
    sa.Column("refresh_token", sa.Text),  # Fernet-encrypted
    sa.Column("client_id", sa.String(CLIENT_ID_CHARS)),
    sa.Column("client_secret", sa.Text),  # Fernet-encrypted
    sa.Column("profile_arn", sa.String(PROFILE_ARN_CHARS)),
    sa.Column("access_token", sa.Text),  # Fernet-encrypted
    sa.Column("expires_at", TIMESTAMP),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("status_detail", sa.Text),
    sa.Column("seed_fingerprint", sa.String(64)),
    sa.Column("token_generation", sa.BigInteger, nullable=False),
    sa.Column("created_at", TIMESTAMP, nullable=False),
    sa.Column("updated_at", TIMESTAMP, nullable=False),
    sa.Column("refreshed_at", TIMESTAMP),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("region", sa.String(REGION_CHARS)),
    sa.Column("proxy_url", sa.Text),  # Fernet-encrypted: a proxy URL may carry credentials
)

meta = sa.Table(
    "q2api_meta",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)

account_stats = sa.Table(
    "q2api_account_stats",
    metadata,
    sa.Column("account_id", ID, primary_key=True),
    sa.Column("requests", sa.BigInteger, nullable=False),
    sa.Column("failures", sa.BigInteger, nullable=False),
    sa.Column("last_error", sa.Text),
    sa.Column("last_used_at", TIMESTAMP),
)

logins = sa.Table(
    "q2api_logins",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("label", sa.String(LABEL_CHARS), nullable=False),
    sa.Column("method", sa.String(32), nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("account_id", ID),
    sa.Column("detail", sa.Text),
    sa.Column("expires_at", TIMESTAMP, nullable=False),
    sa.Column("created_at", TIMESTAMP, nullable=False),
)

account_rests = sa.Table(
    "q2api_account_rests",
    metadata,
    sa.Column("account_id", ID, primary_key=True),
    sa.Column("until", TIMESTAMP, nullable=False),
    sa.Column("reason", sa.String(32), nullable=False),
)

# Stored Responses API conversations (q2api.accounts.shared_responses): one row per response, its
# input items and `response` object as JSON text. MySQL's TEXT stops at 64 KiB: a Codex turn is larger.
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

schema_migrations = sa.Table(
    "q2api_schema_migrations",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("description", sa.String(255), nullable=False),
    sa.Column("applied_at", TIMESTAMP, nullable=False),
)

GENERATION = "generation"


@dataclasses.dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[sa.Connection], None]


def _create(*tables: sa.Table) -> Callable[[sa.Connection], None]:
    def apply(connection: sa.Connection) -> None:
        metadata.create_all(connection, tables=list(tables), checkfirst=True)

    return apply


def _add_proxy_url(connection: sa.Connection) -> None:
    # No default, no constraint: every backend adds a nullable column the same way. Accounts with a
    # Kiro API key need no schema change (auth_method is free text here, the key an encrypted token).
    # A store created by this release has the column already: step 1 creates the table as declared.
    if "proxy_url" in {column["name"] for column in sa.inspect(connection).get_columns(accounts.name)}:
        return
    connection.execute(sa.text("ALTER TABLE q2api_accounts ADD COLUMN proxy_url TEXT"))


def _seed_generation(connection: sa.Connection) -> None:
    connection.execute(sa.insert(meta).values(name=GENERATION, value=0))


# Append only: a released step never changes, a later release adds the next one.
MIGRATIONS = (
    Migration(1, "accounts, store generation, stats, logins", _create(accounts, meta, account_stats, logins)),
    Migration(2, "the store generation starts at 0", _seed_generation),
    Migration(3, "shared account cool-downs", _create(account_rests)),
    Migration(4, "stored Responses API conversations", _create(responses)),
    Migration(5, "an account's own proxy", _add_proxy_url),
)

MIGRATION_LOCK = "migrate"
MIGRATION_LOCK_TIMEOUT = 120.0  # seconds a replica waits for another one's migration


class SchemaTooNew(Exception):
    """The store was migrated by a newer q2api than this one."""


async def migrate(engine: AsyncEngine, locks: DatabaseLocks) -> list[int]:
    """Apply the missing migrations, one replica at a time; the versions this call applied."""
    applied: list[int] = []
    async with engine.connect() as connection, locks.held(connection, MIGRATION_LOCK, MIGRATION_LOCK_TIMEOUT):
        await connection.run_sync(schema_migrations.create, checkfirst=True)
        await connection.commit()
        done = set(await connection.scalars(sa.select(schema_migrations.c.version)))
        newest = MIGRATIONS[-1].version
        if done and max(done) > newest:
            raise SchemaTooNew(
                f"the shared store's schema is at version {max(done)}, newer than this q2api knows ({newest}); "
                "upgrade q2api"
            )
        for migration in MIGRATIONS:
            if migration.version in done:
                continue
            # Steps are plain (synchronous) SQLAlchemy: DDL helpers such as `create_all` exist only in that form.
            await connection.run_sync(migration.apply)
            await connection.execute(
                sa.insert(schema_migrations).values(
                    version=migration.version, description=migration.description, applied_at=time.time()
                )
            )
            await connection.commit()
            applied.append(migration.version)
    return applied
