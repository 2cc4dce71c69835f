"""Adopting a SQLite store written before the one schema: its rows move into the `q2api_*` tables.

Releases before the one schema kept the SQLite file's own tables, without the
prefix: `accounts`, `store_meta`, `account_stats`, `logins`, `account_rests`
and `responses` (the first release had `accounts` alone, without the `enabled`
and `region` columns, and "switched off" as a status). This step copies every
row into the one schema's tables, then drops the old tables; SQLite's DDL is
transactional, so the step lands whole or not at all, and the file lock held
while migrating keeps the other workers out meanwhile. On PostgreSQL and MySQL
it does nothing: their tables always had the prefix.
"""

from __future__ import annotations

import sqlalchemy as sa

_ACCOUNT_COLUMNS = (
    "id", "label", "auth_method", "refresh_token", "client_id", "client_secret", "profile_arn", "access_token",
    "expires_at", "seed_fingerprint", "token_generation", "created_at", "updated_at", "refreshed_at",
)  # fmt: skip
# Tables copied column for column (old name, new name, columns).
_SAME_SHAPE = (
    ("account_stats", "q2api_account_stats", ("account_id", "requests", "failures", "last_error", "last_used_at")),
    ("logins", "q2api_logins", ("id", "label", "method", "status", "account_id", "detail", "expires_at", "created_at")),
    ("account_rests", "q2api_account_rests", ("account_id", "until", "reason")),
    ("responses", "q2api_responses", ("id", "owner", "previous_response_id", "created_at", "expires_at", "model", "record")),
)  # fmt: skip
LEGACY_TABLES = ("accounts", "store_meta", *(old for old, _, _ in _SAME_SHAPE))


def adopt_legacy_sqlite_tables(connection: sa.Connection) -> None:
    if connection.dialect.name != "sqlite":
        return
    present = set(sa.inspect(connection).get_table_names())
    if "accounts" in present:
        _copy_accounts(connection)
    if "store_meta" in present:
        connection.execute(
            sa.text(
                "UPDATE q2api_meta SET value = (SELECT value FROM store_meta WHERE key = 'generation') "
                "WHERE name = 'generation' AND EXISTS (SELECT 1 FROM store_meta WHERE key = 'generation')"
            )
        )
    for old, new, columns in _SAME_SHAPE:
        if old in present:
            listed = ", ".join(columns)
            connection.execute(sa.text(f"INSERT OR REPLACE INTO {new} ({listed}) SELECT {listed} FROM {old}"))
    for old in LEGACY_TABLES:
        if old in present:
            connection.execute(sa.text(f"DROP TABLE {old}"))


def _copy_accounts(connection: sa.Connection) -> None:
    existing = {column["name"] for column in sa.inspect(connection).get_columns("accounts")}
    # The first release kept "switched off" as a status; it is the separate enabled flag since.
    enabled = "COALESCE(enabled, 1)" if "enabled" in existing else "1"
    region = "region" if "region" in existing else "NULL"
    listed = ", ".join(_ACCOUNT_COLUMNS)
    connection.execute(
        sa.text(
            f"INSERT OR REPLACE INTO q2api_accounts ({listed}, status, status_detail, enabled, region) "
            f"SELECT {listed}, CASE WHEN status = 'disabled' THEN 'active' ELSE status END, status_detail, "
            f"CASE WHEN status = 'disabled' THEN 0 ELSE {enabled} END, {region} FROM accounts"
        )
    )
