"""The embedded account store: one SQLite file in the data directory.

Holds each Amazon Q account's credentials and the tokens the upstream rotates,
so a restart (or another `--workers` process) continues with the newest
refresh token instead of one the token service has already retired.

Writes happen only when tokens are refreshed or accounts change, never per
request, each in one short transaction. WAL mode plus a busy timeout lets
several worker processes share the file without "database is locked" errors.
Every method opens its own connection: the store is used rarely and from
several threads, and a per-call connection can never be shared by mistake.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from q2api.amazonq.accounts import schema
from q2api.amazonq.accounts.file_lock import exclusive_lock
from q2api.amazonq.accounts.private_files import create_private_dir, create_private_file

DB_FILENAME = "q2api.sqlite3"
INIT_LOCK_FILENAME = "store-init.lock"
ENV_ACCOUNT_ID = "env"
_BUSY_TIMEOUT_MS = 10_000


class AccountStatus(enum.StrEnum):
    ACTIVE = "active"
    # The refresh token was rejected or the account is suspended; an operator must sign in again.
    NEEDS_LOGIN = "needs_login"


@dataclasses.dataclass(frozen=True, repr=False)
class Account:
    """One stored account, secrets included. Its repr masks the secrets."""

    id: str
    label: str
    auth_method: str  # "idc" | "social"
    refresh_token: str | None
    client_id: str | None
    client_secret: str | None
    profile_arn: str | None
    access_token: str | None
    expires_at: float | None  # epoch seconds; None = unknown (an access token given without expiry)
    status: AccountStatus
    status_detail: str | None
    token_generation: int  # bumped on every token change, so stale copies are easy to spot
    created_at: float
    updated_at: float
    refreshed_at: float | None
    enabled: bool = True  # False: switched off by the operator, serves nothing
    region: str | None = None  # the OIDC region of an IdC login (None: the configured endpoint's)

    def view(self) -> AccountView:
        return AccountView(
            id=self.id,
            label=self.label,
            auth_method=self.auth_method,
            status=self.status.value,
            status_detail=self.status_detail,
            has_refresh_token=bool(self.refresh_token),
            has_access_token=bool(self.access_token),
            client_id=_mask(self.client_id),
            profile_arn=self.profile_arn,
            expires_at=self.expires_at,
            refreshed_at=self.refreshed_at,
            created_at=self.created_at,
            enabled=self.enabled,
            region=self.region,
        )

    def __repr__(self) -> str:
        return f"Account(id={self.id!r}, label={self.label!r}, auth_method={self.auth_method!r}, status={self.status.value!r})"


@dataclasses.dataclass(frozen=True)
class AccountView:
    """What `q2api accounts list` may show: no secret, the client id shortened."""

    id: str
    label: str
    auth_method: str
    status: str
    status_detail: str | None
    has_refresh_token: bool
    has_access_token: bool
    client_id: str | None
    profile_arn: str | None
    expires_at: float | None
    refreshed_at: float | None
    created_at: float
    enabled: bool = True
    region: str | None = None


@dataclasses.dataclass(frozen=True, repr=False)
class EnvAccount:
    """The account configured through AMAZONQ_* variables."""

    auth_method: str
    refresh_token: str | None
    access_token: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    profile_arn: str | None = None
    label: str = "environment"

    def fingerprint(self) -> str:
        # Identifies which env token seeded the row without storing it twice in the clear.
        source = f"refresh:{self.refresh_token}" if self.refresh_token else f"access:{self.access_token}"
        return hashlib.sha256(source.encode()).hexdigest()

    def __repr__(self) -> str:
        return f"EnvAccount(auth_method={self.auth_method!r}, label={self.label!r})"


class AccountStore:
    def __init__(self, data_dir: str | Path) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / DB_FILENAME
        create_private_dir(self.data_dir)
        # `--workers` processes start together, and SQLite answers a second
        # simultaneous switch to WAL with "database is locked" at once (the busy
        # timeout does not cover it): set the file up one process at a time.
        with exclusive_lock(self.data_dir / INIT_LOCK_FILENAME):
            create_private_file(self.path)
            with self.connect() as db:
                db.execute("PRAGMA journal_mode=WAL")
                schema.create_or_upgrade(db)

    # -- reading ------------------------------------------------------------

    def get(self, account_id: str) -> Account | None:
        with self.connect() as db:
            row = db.execute("SELECT * FROM accounts WHERE id = ?", (account_id,)).fetchone()
        return _account(row) if row else None

    def accounts(self) -> list[Account]:
        with self.connect() as db:
            rows = db.execute("SELECT * FROM accounts ORDER BY created_at, id").fetchall()
        return [_account(row) for row in rows]

    def generation(self) -> int:
        """A number that changes whenever an account is added, changed or removed (by any process)."""
        with self.connect() as db:
            row = db.execute("SELECT value FROM store_meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    def list_views(self) -> list[AccountView]:
        """The listing for the CLI: never a secret."""
        return [account.view() for account in self.accounts()]

    # -- account changes ----------------------------------------------------

    def add(
        self,
        *,
        auth_method: str,
        refresh_token: str,
        label: str | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        profile_arn: str | None = None,
        access_token: str | None = None,
        expires_at: float | None = None,
        account_id: str | None = None,
        region: str | None = None,
    ) -> Account:
        """Add an account, or replace the credentials of `account_id` (e.g. after a new login).

        Replacing keeps the operator's enabled flag and clears "needs login".
        """
        if auth_method not in ("idc", "social"):
            raise ValueError(f"auth method must be 'idc' or 'social', not {auth_method!r}")
        if auth_method == "idc" and not (client_id and client_secret):
            raise ValueError("an IdC account needs its OIDC client id and client secret")
        account_id = account_id or uuid.uuid4().hex[:12]
        now = time.time()
        with self.transaction() as db:
            db.execute(
                """
                INSERT INTO accounts (id, label, auth_method, refresh_token, client_id, client_secret,
                                      profile_arn, access_token, expires_at, status, created_at, updated_at,
                                      region, refreshed_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET
                    label = excluded.label, auth_method = excluded.auth_method,
                    refresh_token = excluded.refresh_token, client_id = excluded.client_id,
                    client_secret = excluded.client_secret, profile_arn = excluded.profile_arn,
                    access_token = excluded.access_token, expires_at = excluded.expires_at,
                    status = 'active', status_detail = NULL, region = excluded.region,
                    refreshed_at = excluded.refreshed_at,
                    token_generation = accounts.token_generation + 1, updated_at = excluded.updated_at
                """,
                (
                    account_id,
                    label or account_id,
                    auth_method,
                    refresh_token,
                    client_id,
                    client_secret,
                    profile_arn,
                    access_token,
                    expires_at,
                    now,
                    now,
                    region,
                    now if access_token else None,
                ),
            )
            schema.bump_generation(db)
        account = self.get(account_id)
        assert account is not None
        return account

    def remove(self, account_id: str) -> bool:
        with self.transaction() as db:
            cursor = db.execute("DELETE FROM accounts WHERE id = ?", (account_id,))
            db.execute("DELETE FROM account_stats WHERE account_id = ?", (account_id,))
            schema.bump_generation(db)
        return cursor.rowcount > 0

    def update(self, account_id: str, *, enabled: bool | None = None, label: str | None = None) -> Account | None:
        """Switch an account on or off, or rename it; None when there is no such account."""
        with self.transaction() as db:
            db.execute(
                """
                UPDATE accounts SET enabled = COALESCE(?, enabled), label = COALESCE(?, label), updated_at = ?
                WHERE id = ?
                """,
                (None if enabled is None else int(enabled), label, time.time(), account_id),
            )
            schema.bump_generation(db)
        return self.get(account_id)

    def seed_from_env(self, env: EnvAccount) -> Account:
        """Create or update the environment account, keeping a token the upstream rotated since.

        The row remembers a fingerprint of the env token that seeded it. The same
        env token on a restart leaves the stored (possibly rotated) tokens alone;
        a changed env token means the operator logged in again, so it replaces them.
        Client registration and profile ARN follow the environment either way.
        """
        fingerprint = env.fingerprint()
        now = time.time()
        with self.transaction() as db:
            row = db.execute("SELECT * FROM accounts WHERE id = ?", (ENV_ACCOUNT_ID,)).fetchone()
            if row is None:
                db.execute(
                    """
                    INSERT INTO accounts (id, label, auth_method, refresh_token, client_id, client_secret,
                                          profile_arn, access_token, expires_at, seed_fingerprint,
                                          created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)
                    """,
                    (
                        ENV_ACCOUNT_ID,
                        env.label,
                        env.auth_method,
                        env.refresh_token,
                        env.client_id,
                        env.client_secret,
                        env.profile_arn,
                        env.access_token,
                        fingerprint,
                        now,
                        now,
                    ),
                )
            elif row["seed_fingerprint"] != fingerprint:
                db.execute(
                    """
                    UPDATE accounts SET auth_method = ?, refresh_token = ?, client_id = ?, client_secret = ?,
                        profile_arn = COALESCE(?, profile_arn), access_token = ?, expires_at = NULL,
                        status = 'active', status_detail = NULL, seed_fingerprint = ?,
                        token_generation = token_generation + 1, updated_at = ?
                    WHERE id = ?
                    """,
                    (
                        env.auth_method,
                        env.refresh_token,
                        env.client_id,
                        env.client_secret,
                        env.profile_arn,
                        env.access_token,
                        fingerprint,
                        now,
                        ENV_ACCOUNT_ID,
                    ),
                )
            elif _config_differs(row, env):
                db.execute(
                    """
                    UPDATE accounts SET auth_method = ?, client_id = ?, client_secret = ?,
                        profile_arn = COALESCE(?, profile_arn), updated_at = ?
                    WHERE id = ?
                    """,
                    (env.auth_method, env.client_id, env.client_secret, env.profile_arn, now, ENV_ACCOUNT_ID),
                )
            schema.bump_generation(db)
        account = self.get(ENV_ACCOUNT_ID)
        assert account is not None
        return account

    # -- token changes ------------------------------------------------------

    def save_tokens(
        self,
        account_id: str,
        *,
        access_token: str,
        expires_at: float | None,
        refresh_token: str | None = None,
        profile_arn: str | None = None,
    ) -> Account | None:
        """Store a refresh result in one transaction; a None refresh token / ARN keeps the old one."""
        now = time.time()
        with self.transaction() as db:
            db.execute(
                """
                UPDATE accounts SET access_token = ?, expires_at = ?,
                    refresh_token = COALESCE(?, refresh_token), profile_arn = COALESCE(?, profile_arn),
                    status = 'active', status_detail = NULL, token_generation = token_generation + 1,
                    refreshed_at = ?, updated_at = ?
                WHERE id = ?
                """,
                (access_token, expires_at, refresh_token, profile_arn, now, now, account_id),
            )
            schema.bump_generation(db)  # other workers adopt the token (and a cleared "needs login")
        return self.get(account_id)

    def set_status(self, account_id: str, status: AccountStatus, detail: str | None = None) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE accounts SET status = ?, status_detail = ?, updated_at = ? WHERE id = ?",
                (status.value, detail, time.time(), account_id),
            )
            schema.bump_generation(db)

    # -- plumbing -----------------------------------------------------------

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        # `timeout` is SQLite's busy timeout: another worker's short write makes us wait, not fail.
        db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            db.row_factory = sqlite3.Row
            yield db
        finally:
            db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        # BEGIN IMMEDIATE takes the write lock up front, so a read-then-write
        # (seeding) cannot interleave with another process doing the same.
        with self.connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")


def _config_differs(row: sqlite3.Row, env: EnvAccount) -> bool:
    return (
        row["auth_method"] != env.auth_method
        or row["client_id"] != env.client_id
        or row["client_secret"] != env.client_secret
        or (env.profile_arn is not None and row["profile_arn"] != env.profile_arn)
    )


def _account(row: sqlite3.Row) -> Account:
    return Account(
        id=row["id"],
        label=row["label"],
        auth_method=row["auth_method"],
        refresh_token=row["refresh_token"],
        client_id=row["client_id"],
        client_secret=row["client_secret"],
        profile_arn=row["profile_arn"],
        access_token=row["access_token"],
        expires_at=row["expires_at"],
        status=AccountStatus(row["status"]),
        status_detail=row["status_detail"],
        token_generation=row["token_generation"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        refreshed_at=row["refreshed_at"],
        enabled=bool(row["enabled"]),
        region=row["region"],
    )


def _mask(value: str | None) -> str | None:
    if not value:
        return value
    return value[:4] + "…" if len(value) > 8 else "…"
