"""The SQLite schema of the account store, and the upgrades older data directories need.

Six tables:

* `accounts`: credentials, rotated tokens, the operator's enabled flag and the login state;
* `store_meta`: the store's generation, bumped by every account change, so that
  each worker notices a change by reading one number (hot reload);
* `account_stats`: per-account request counters, shared by every worker;
* `logins`: device-code logins under way, so any worker can answer for one;
* `account_rests`: cool-downs (throttled, quota spent…), so every worker rests the account;
* `responses`: stored Responses API conversations (q2api.accounts.sqlite_responses), each row one
  response, its input items and the `response` object as JSON, until it expires.
"""

from __future__ import annotations

import sqlite3

TABLES = (
    """
    CREATE TABLE IF NOT EXISTS accounts (
        id                TEXT PRIMARY KEY,
        label             TEXT NOT NULL,
        auth_method       TEXT NOT NULL CHECK (auth_method IN ('idc', 'social', 'api_key')),
        refresh_token     TEXT,
        client_id         TEXT,
        client_secret     TEXT,
        profile_arn       TEXT,
        access_token      TEXT,
        expires_at        REAL,
        status            TEXT NOT NULL DEFAULT 'active',
        status_detail     TEXT,
        seed_fingerprint  TEXT,
        token_generation  INTEGER NOT NULL DEFAULT 0,
        created_at        REAL NOT NULL,
        updated_at        REAL NOT NULL,
        refreshed_at      REAL,
        enabled           INTEGER NOT NULL DEFAULT 1,
        region            TEXT,
        proxy_url         TEXT
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS store_meta (
        key    TEXT PRIMARY KEY,
        value  INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS account_stats (
        account_id    TEXT PRIMARY KEY,
        requests      INTEGER NOT NULL DEFAULT 0,
        failures      INTEGER NOT NULL DEFAULT 0,
        last_error    TEXT,
        last_used_at  REAL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS logins (
        id          TEXT PRIMARY KEY,
        label       TEXT NOT NULL,
        method      TEXT NOT NULL,
        status      TEXT NOT NULL,
        account_id  TEXT,
        detail      TEXT,
        expires_at  REAL NOT NULL,
        created_at  REAL NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS account_rests (
        account_id  TEXT PRIMARY KEY,
        until       REAL NOT NULL,
        reason      TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS responses (
        id                    TEXT PRIMARY KEY,
        owner                 TEXT NOT NULL,
        previous_response_id  TEXT,
        created_at            REAL NOT NULL,
        expires_at            REAL NOT NULL,
        model                 TEXT NOT NULL,
        record                TEXT NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS responses_expiry ON responses (expires_at)",
)

# Columns added after the first release: (name, declaration).
_ADDED_ACCOUNT_COLUMNS = (
    ("enabled", "INTEGER NOT NULL DEFAULT 1"),
    ("region", "TEXT"),
    ("proxy_url", "TEXT"),
)


def create_or_upgrade(db: sqlite3.Connection) -> None:
    """Create missing tables and add missing columns (call under the store's init lock)."""
    for table in TABLES:
        db.execute(table)
    existing = {row[1] for row in db.execute("PRAGMA table_info(accounts)")}
    for name, declaration in _ADDED_ACCOUNT_COLUMNS:
        if name not in existing:
            db.execute(f"ALTER TABLE accounts ADD COLUMN {name} {declaration}")
    _allow_api_keys(db)
    # The first release kept "switched off" as a status; it is now the separate enabled flag.
    db.execute("UPDATE accounts SET enabled = 0, status = 'active' WHERE status = 'disabled'")
    db.execute("INSERT OR IGNORE INTO store_meta (key, value) VALUES ('generation', 0)")


def _allow_api_keys(db: sqlite3.Connection) -> None:
    """Rebuild an older `accounts` table whose CHECK knows only 'idc' and 'social' (SQLite cannot alter a CHECK).

    The documented way (sqlite.org/lang_altertable.html, "other kinds of table schema changes"):
    create the new table, copy the rows, drop the old one, rename — in one transaction.
    """
    row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'accounts'").fetchone()
    if row is None or "'api_key'" in row[0]:
        return
    columns = ", ".join(column[1] for column in db.execute("PRAGMA table_info(accounts)"))
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("ALTER TABLE accounts RENAME TO accounts_before_api_keys")
        db.execute(TABLES[0])
        db.execute(f"INSERT INTO accounts ({columns}) SELECT {columns} FROM accounts_before_api_keys")
        db.execute("DROP TABLE accounts_before_api_keys")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def bump_generation(db: sqlite3.Connection) -> None:
    """Mark an account change; call inside the transaction that makes it."""
    db.execute("UPDATE store_meta SET value = value + 1 WHERE key = 'generation'")
