"""The embedded account store: one SQLite file in the data directory.

Holds each Amazon Q account's credentials and the tokens the upstream rotates,
so a restart (or another `--workers` process) continues with the newest
refresh token instead of one the token service has already retired.

Writes happen only when tokens are refreshed or accounts change, never per
request, each in one short transaction. WAL mode plus a busy timeout lets
several worker processes share the file without "database is locked" errors.

The methods are written as plain blocking sqlite3 code; `@in_thread` makes each
one the coroutine the `AccountStore` protocol asks for, run in a worker thread
(a busy timeout may hold it for seconds, which the event loop must not feel).
Every call opens its own connection: calls run on several threads, and a
per-call connection can never be shared by mistake.
"""

from __future__ import annotations

import asyncio
import functools
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Collection, Coroutine, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from q2api.accounts import schema
from q2api.accounts.field_limits import check_account_fields
from q2api.accounts.file_lock import exclusive_lock, exclusive_lock_async
from q2api.accounts.private_files import create_private_dir, create_private_file
from q2api.accounts.records import (
    ENV_ACCOUNT_ID,
    LOGIN_RECORD_LIFETIME,
    Account,
    AccountRest,
    AccountStats,
    AccountStatus,
    AccountView,
    EnvAccount,
    LoginRecord,
    LoginStatus,
    StatsDelta,
    check_new_credentials,
    login_record,
)

DB_FILENAME = "q2api.sqlite3"
INIT_LOCK_FILENAME = "store-init.lock"
_BUSY_TIMEOUT_MS = 10_000

P = ParamSpec("P")
T = TypeVar("T")


def in_thread(method: Callable[P, T]) -> Callable[P, Coroutine[Any, Any, T]]:
    """The blocking `method` as a coroutine that runs it in a worker thread, off the event loop."""

    @functools.wraps(method)
    async def run_in_thread(*args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.to_thread(method, *args, **kwargs)

    return run_in_thread


class SqliteAccountStore:
    """The embedded store (implements `AccountStore`, store_protocol.py)."""

    def __init__(self, data_dir: str | Path, *, busy_timeout: float = _BUSY_TIMEOUT_MS / 1000) -> None:
        self.data_dir = Path(data_dir)
        self._busy_timeout = busy_timeout
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

    @property
    def location(self) -> str:
        return str(self.path.resolve())

    async def close(self) -> None:
        """Nothing to release: every call opens and closes its own connection."""

    # -- reading ------------------------------------------------------------

    @in_thread
    def get(self, account_id: str) -> Account | None:
        return self._read(account_id)

    @in_thread
    def accounts(self) -> list[Account]:
        return self._read_all()

    @in_thread
    def generation(self) -> int:
        """A number that changes whenever an account is added, changed or removed (by any process)."""
        with self.connect() as db:
            row = db.execute("SELECT value FROM store_meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    @in_thread
    def list_views(self) -> list[AccountView]:
        """The listing for the CLI: never a secret."""
        return [account.view() for account in self._read_all()]

    # -- account changes ----------------------------------------------------

    @in_thread
    def add(
        self,
        *,
        auth_method: str,
        refresh_token: str | None,
        label: str | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        profile_arn: str | None = None,
        access_token: str | None = None,
        expires_at: float | None = None,
        account_id: str | None = None,
        region: str | None = None,
        proxy_url: str | None = None,
    ) -> Account:
        """Add an account, or replace the credentials of `account_id` (e.g. after a new login).

        Replacing keeps the operator's enabled flag and clears "needs login".
        """
        check_new_credentials(auth_method, client_id, client_secret)
        check_account_fields(
            account_id=account_id,
            label=label,
            refresh_token=refresh_token,
            client_id=client_id,
            client_secret=client_secret,
            profile_arn=profile_arn,
            region=region,
            proxy_url=proxy_url,
        )
        account_id = account_id or uuid.uuid4().hex[:12]
        now = time.time()
        with self.transaction() as db:
            db.execute(
                """
                INSERT INTO accounts (id, label, auth_method, refresh_token, client_id, client_secret,
                                      profile_arn, access_token, expires_at, status, created_at, updated_at,
                                      region, refreshed_at, proxy_url)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET
                    label = excluded.label, auth_method = excluded.auth_method,
                    refresh_token = excluded.refresh_token, client_id = excluded.client_id,
                    client_secret = excluded.client_secret, profile_arn = excluded.profile_arn,
                    access_token = excluded.access_token, expires_at = excluded.expires_at,
                    status = 'active', status_detail = NULL, region = excluded.region,
                    refreshed_at = excluded.refreshed_at, proxy_url = excluded.proxy_url,
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
                    proxy_url,
                ),
            )
            schema.bump_generation(db)
        account = self._read(account_id)
        assert account is not None
        return account

    @in_thread
    def remove(self, account_id: str) -> bool:
        with self.transaction() as db:
            cursor = db.execute("DELETE FROM accounts WHERE id = ?", (account_id,))
            db.execute("DELETE FROM account_stats WHERE account_id = ?", (account_id,))
            db.execute("DELETE FROM account_rests WHERE account_id = ?", (account_id,))
            schema.bump_generation(db)
        return cursor.rowcount > 0

    @in_thread
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
        return self._read(account_id)

    @in_thread
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
                                          created_at, updated_at, proxy_url)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)
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
                        env.proxy_url,
                    ),
                )
            elif row["seed_fingerprint"] != fingerprint:
                db.execute(
                    """
                    UPDATE accounts SET auth_method = ?, refresh_token = ?, client_id = ?, client_secret = ?,
                        profile_arn = COALESCE(?, profile_arn), access_token = ?, expires_at = NULL,
                        status = 'active', status_detail = NULL, seed_fingerprint = ?,
                        token_generation = token_generation + 1, updated_at = ?, proxy_url = ?
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
                        env.proxy_url,
                        ENV_ACCOUNT_ID,
                    ),
                )
            elif _config_differs(row, env):
                db.execute(
                    """
                    UPDATE accounts SET auth_method = ?, client_id = ?, client_secret = ?,
                        profile_arn = COALESCE(?, profile_arn), updated_at = ?, proxy_url = ?
                    WHERE id = ?
                    """,
                    (
                        env.auth_method,
                        env.client_id,
                        env.client_secret,
                        env.profile_arn,
                        now,
                        env.proxy_url,
                        ENV_ACCOUNT_ID,
                    ),
                )
            schema.bump_generation(db)
        account = self._read(ENV_ACCOUNT_ID)
        assert account is not None
        return account

    # -- token changes ------------------------------------------------------

    @in_thread
    def save_tokens(
        self,
        account_id: str,
        *,
        access_token: str,
        expires_at: float | None,
        refresh_token: str | None = None,
        profile_arn: str | None = None,
        if_generation: int | None = None,
    ) -> Account | None:
        now = time.time()
        with self.transaction() as db:
            cursor = db.execute(
                """
                UPDATE accounts SET access_token = ?, expires_at = ?,
                    refresh_token = COALESCE(?, refresh_token), profile_arn = COALESCE(?, profile_arn),
                    status = 'active', status_detail = NULL, token_generation = token_generation + 1,
                    refreshed_at = ?, updated_at = ?
                WHERE id = ? AND (? IS NULL OR token_generation = ?)
                """,
                (
                    access_token,
                    expires_at,
                    refresh_token,
                    profile_arn,
                    now,
                    now,
                    account_id,
                    if_generation,
                    if_generation,
                ),
            )
            schema.bump_generation(db)  # other workers adopt the token (and a cleared "needs login")
        return self._read(account_id) if cursor.rowcount else None

    @in_thread
    def set_status(self, account_id: str, status: AccountStatus, detail: str | None = None) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE accounts SET status = ?, status_detail = ?, updated_at = ? WHERE id = ?",
                (status.value, detail, time.time(), account_id),
            )
            schema.bump_generation(db)

    def refresh_lock(self, account_id: str) -> AbstractAsyncContextManager[None]:
        # An fcntl lock: released by the kernel when its process dies, however it dies.
        return exclusive_lock_async(self.data_dir / f"refresh-{_safe_name(account_id)}.lock")

    @in_thread
    def import_account(self, account: Account) -> None:
        columns = _IMPORTED_COLUMNS
        values = [_column_value(account, column) for column in columns]
        updates = ", ".join(f"{column} = excluded.{column}" for column in columns if column != "id")
        with self.transaction() as db:
            db.execute(
                f"INSERT INTO accounts ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
                f" ON CONFLICT (id) DO UPDATE SET {updates}",
                values,
            )
            schema.bump_generation(db)

    # -- shared counters and cool-downs ----------------------------------------

    @in_thread
    def add_stats(self, pending: Mapping[str, StatsDelta]) -> None:
        if not pending:
            return
        with self.transaction() as db:
            for account_id, delta in pending.items():
                db.execute(
                    """
                    INSERT INTO account_stats (account_id, requests, failures, last_error, last_used_at)
                    SELECT id, ?, ?, ?, ? FROM accounts WHERE id = ?
                    ON CONFLICT (account_id) DO UPDATE SET
                        requests = requests + excluded.requests,
                        failures = failures + excluded.failures,
                        last_error = COALESCE(excluded.last_error, last_error),
                        last_used_at = MAX(COALESCE(last_used_at, 0), COALESCE(excluded.last_used_at, 0))
                    """,
                    (delta.requests, delta.failures, delta.last_error, delta.last_used_at, account_id),
                )

    @in_thread
    def read_stats(self) -> dict[str, AccountStats]:
        with self.connect() as db:
            rows = db.execute("SELECT * FROM account_stats").fetchall()
        return {
            row["account_id"]: AccountStats(row["requests"], row["failures"], row["last_error"], row["last_used_at"])
            for row in rows
        }

    @in_thread
    def add_rests(self, rests: Mapping[str, AccountRest]) -> None:
        if not rests:
            return
        with self.transaction() as db:
            for account_id, rest in rests.items():
                db.execute(
                    """
                    INSERT INTO account_rests (account_id, until, reason) VALUES (?, ?, ?)
                    ON CONFLICT (account_id) DO UPDATE SET until = excluded.until, reason = excluded.reason
                    WHERE excluded.until > account_rests.until
                    """,
                    (account_id, rest.until, rest.reason),
                )

    @in_thread
    def clear_rests(self, account_ids: Collection[str]) -> None:
        if account_ids:
            with self.transaction() as db:
                db.executemany("DELETE FROM account_rests WHERE account_id = ?", [(i,) for i in account_ids])

    @in_thread
    def read_rests(self) -> dict[str, AccountRest]:
        with self.connect() as db:
            rows = db.execute("SELECT * FROM account_rests WHERE until > ?", (time.time(),)).fetchall()
        return {row["account_id"]: AccountRest(row["until"], row["reason"]) for row in rows}

    # -- device-code logins ------------------------------------------------------

    @in_thread
    def record_login(self, login_id: str, label: str, method: str, expires_in: float) -> None:
        now = time.time()
        with self.transaction() as db:
            db.execute(
                "INSERT INTO logins (id, label, method, status, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (login_id, label, method, LoginStatus.PENDING.value, now + expires_in, now),
            )
            # Keep the table small: logins older than a day are of no use to anyone.
            db.execute("DELETE FROM logins WHERE created_at < ?", (now - LOGIN_RECORD_LIFETIME,))

    @in_thread
    def finish_login(
        self, login_id: str, status: LoginStatus, account_id: str | None = None, detail: str | None = None
    ) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE logins SET status = ?, account_id = ?, detail = ? WHERE id = ?",
                (status.value, account_id, detail, login_id),
            )

    @in_thread
    def read_login(self, login_id: str) -> LoginRecord | None:
        with self.connect() as db:
            row = db.execute("SELECT * FROM logins WHERE id = ?", (login_id,)).fetchone()
        if row is None:
            return None
        return login_record(
            row["id"], row["label"], row["method"], row["status"], row["account_id"], row["detail"], row["expires_at"]
        )

    # -- plumbing -----------------------------------------------------------

    def _read(self, account_id: str) -> Account | None:
        with self.connect() as db:
            row = db.execute("SELECT * FROM accounts WHERE id = ?", (account_id,)).fetchone()
        return _account(row) if row else None

    def _read_all(self) -> list[Account]:
        with self.connect() as db:
            rows = db.execute("SELECT * FROM accounts ORDER BY created_at, id").fetchall()
        return [_account(row) for row in rows]

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        # `timeout` is SQLite's busy timeout: another worker's short write makes us wait, not fail.
        db = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None)
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


# Every column `import_account` copies (the seed fingerprint stays behind: it belongs to one environment).
_IMPORTED_COLUMNS = (
    "id", "label", "auth_method", "refresh_token", "client_id", "client_secret", "profile_arn", "access_token",
    "expires_at", "status", "status_detail", "token_generation", "created_at", "updated_at", "refreshed_at",
    "enabled", "region", "proxy_url",
)  # fmt: skip


def _column_value(account: Account, column: str) -> object:
    value = getattr(account, column)
    if isinstance(value, AccountStatus):
        return value.value
    return int(value) if isinstance(value, bool) else value


def _safe_name(account_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", account_id)[:64]


def _config_differs(row: sqlite3.Row, env: EnvAccount) -> bool:
    return (
        row["auth_method"] != env.auth_method
        or row["client_id"] != env.client_id
        or row["client_secret"] != env.client_secret
        or (env.profile_arn is not None and row["profile_arn"] != env.profile_arn)
        or bool(row["proxy_url"] != env.proxy_url)
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
        proxy_url=row["proxy_url"],
    )
