"""The account store's one schema: the same tables in SQLite, PostgreSQL and MySQL/MariaDB.

Every table carries a `q2api_` prefix, so a shared database may hold other
applications' tables too. The tables:

* `q2api_accounts`: credentials, rotated tokens, the operator's enabled flag and the login state
  (token columns are Fernet-encrypted in a shared database, plain in the private SQLite file);
* `q2api_meta`: the store's generation, bumped by every account change, so each worker notices a
  change by reading one number (hot reload);
* `q2api_account_stats`: per-account request counters, added to by every worker;
* `q2api_logins`: device-code logins under way, so any worker can answer for one;
* `q2api_account_rests`: cool-downs (throttled, quota spent…), so every worker rests the account;
* `q2api_responses`: stored Responses API conversations (declared with them, q2api.stored_responses.table).

`STORE_MIGRATIONS` is the chain that builds them (migrations.py runs it). Adding a column or a
table: declare it here, and append a step that adds it to stores already in use
(`add_column` below, or `create(table)`); a released step never changes.
"""

from __future__ import annotations

import sqlalchemy as sa

from q2api.accounts.field_limits import CLIENT_ID_CHARS, ID_CHARS, LABEL_CHARS, PROFILE_ARN_CHARS, REGION_CHARS
from q2api.accounts.legacy_sqlite import adopt_legacy_sqlite_tables
from q2api.store.migrations import Migration, MigrationChain, add_column, bookkeeping_table, create
from q2api.stored_responses.table import responses

metadata = sa.MetaData()

ID = sa.String(ID_CHARS)
TIMESTAMP: sa.Double[float] = sa.Double()  # epoch seconds

accounts = sa.Table(
    "q2api_accounts",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("label", sa.String(LABEL_CHARS), nullable=False),
    sa.Column("auth_method", sa.String(16), nullable=False),
    sa.Column("refresh_token", sa.Text),  # secret
    sa.Column("client_id", sa.String(CLIENT_ID_CHARS)),
    sa.Column("client_secret", sa.Text),  # secret
    sa.Column("profile_arn", sa.String(PROFILE_ARN_CHARS)),
    sa.Column("access_token", sa.Text),  # secret
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
    sa.Column("proxy_url", sa.Text),  # secret: a proxy URL may carry credentials
)

# The columns a shared store keeps encrypted (the SQLite file is private to its user instead). A Kiro
# API key is kept as the account's access token (with no expiry), so it is one of them.
SECRET_ACCOUNT_COLUMNS = ("refresh_token", "client_secret", "access_token", "proxy_url")

meta = sa.Table(
    "q2api_meta",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)
GENERATION = "generation"  # the `q2api_meta` row of the store generation

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


def _seed_generation(connection: sa.Connection) -> None:
    connection.execute(sa.insert(meta).values(name=GENERATION, value=0))


# The versions a shared store applied before the one schema keep their numbers and meaning, so a
# shared database of an earlier release is simply up to date to step 4. Append only.
STORE_MIGRATIONS = MigrationChain(
    name="store",
    bookkeeping=bookkeeping_table("q2api_schema_migrations", metadata),
    steps=(
        Migration(1, "accounts, store generation, stats, logins", create(accounts, meta, account_stats, logins)),
        Migration(2, "the store generation starts at 0", _seed_generation),
        Migration(3, "shared account cool-downs", create(account_rests)),
        Migration(4, "stored Responses API conversations", create(responses)),
        Migration(5, "adopt a SQLite store of the two-schema releases", adopt_legacy_sqlite_tables),
        Migration(6, "an account's own proxy", add_column(accounts, "proxy_url")),
    ),
)
