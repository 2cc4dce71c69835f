"""The account store: one implementation over one schema, for the SQLite file and a shared database alike.

Holds each Amazon Q account's credentials and the tokens the upstream rotates,
so a restart (or another worker, or another replica) continues with the newest
refresh token instead of one the token service has already retired. Writes
happen only when tokens are refreshed or accounts change, never per request,
each in one short transaction.

What differs between the databases is handed in, never tested for in the
methods: the database itself (sqlite_database.py, shared_database.py), how
secrets are kept (plain in the owner-only SQLite file, Fernet-encrypted in a
shared database) and the refresh lock (an fcntl file lock shared by the
`--workers` of one machine, or a database lock that dies with its connection).

Across processes:

* every account change runs in one transaction that first bumps the store
  generation, whose row lock serialises account writers (no lost update, no
  duplicate seed) and tells every worker's reloader to re-read;
* a token refresh holds the refresh lock, and its result is committed before
  the lock is let go.

Open it with `open_account_store` (opening.py), or `SqliteAccountStore(data_dir)`
for the file directly; close it with `close()` in the event loop that opened it.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from loguru import logger

from q2api.accounts import store_schema as tables
from q2api.accounts.field_limits import check_account_fields
from q2api.accounts.records import (
    ENV_ACCOUNT_ID,
    Account,
    AccountStatus,
    AccountView,
    EnvAccount,
    check_new_credentials,
)
from q2api.accounts.sql_logins import SqlLogins
from q2api.accounts.sql_telemetry import SqlTelemetry
from q2api.store.database import StoreDatabase, affected_rows, all_rows, first_row
from q2api.store.errors import StoreUnavailable
from q2api.store.file_lock import exclusive_lock_async
from q2api.store.migrations import MigrationChain
from q2api.store.secret_box import SecretKeyMismatch
from q2api.store.sqlite_database import BUSY_TIMEOUT, DB_FILENAME, open_sqlite_file

T = TypeVar("T")
# The schema chains a store is migrated with unless told otherwise: the account store's own (a module
# keeping tables beside it runs its chain on its own connection: docs/architecture.md, "The store").
DEFAULT_CHAINS: tuple[MigrationChain, ...] = (tables.STORE_MIGRATIONS,)


class SecretKeeper(Protocol):
    """How token columns are written and read back (secret_box.SecretBox encrypts them)."""

    def seal(self, value: str | None) -> str | None: ...

    def open(self, value: str | None) -> str | None: ...


class PlainSecrets:
    """The SQLite file's way: the file is its owner's alone (0600 in a 0700 directory), secrets are kept as is."""

    def seal(self, value: str | None) -> str | None:
        return value

    def open(self, value: str | None) -> str | None:
        return value


RefreshLock = Callable[[str], contextlib.AbstractAsyncContextManager[None]]


class SqlAccountStore(SqlTelemetry, SqlLogins):
    """The store (implements `AccountStore`, store_protocol.py) over a migrated database.

    Credentials here; counters and cool-downs from `SqlTelemetry`, logins from `SqlLogins`.
    """

    def __init__(self, db: StoreDatabase, secrets: SecretKeeper, refresh_lock: RefreshLock, location: str) -> None:
        self._db = db
        self._secrets = secrets
        self._refresh_lock = refresh_lock
        self._location = location
        self._unreadable: set[str] = set()  # ids of the rows skipped (and logged) because they do not decrypt

    @property
    def location(self) -> str:
        return self._location

    @property
    def database(self) -> StoreDatabase:
        """Its connections, for the stores that share its database (q2api.stored_responses.sql_store)."""
        return self._db

    async def close(self) -> None:
        await self._db.dispose()

    # -- reading ----------------------------------------------------------------

    async def get(self, account_id: str) -> Account | None:
        row = await self._db.read(lambda db: first_row(db, _accounts_where(account_id)))
        return self._account(row) if row is not None else None

    async def accounts(self) -> list[Account]:
        """Every account whose secrets open with the key; a row sealed with another key is skipped (and logged).

        Raises SecretKeyMismatch when no row opens at all: then the key is wrong, not a row.
        """
        query = sa.select(tables.accounts).order_by(tables.accounts.c.created_at, tables.accounts.c.id)
        rows = await self._db.read(lambda db: all_rows(db, query))
        readable: list[Account] = []
        unreadable: list[tuple[sa.Row[Any], SecretKeyMismatch]] = []
        for row in rows:
            try:
                readable.append(self._account(row))
            except SecretKeyMismatch as exc:
                unreadable.append((row, exc))
        if unreadable and not readable:
            raise unreadable[0][1]
        self._unreadable.intersection_update(row.id for row, _ in unreadable)  # a mended row may be logged again
        for row, error in unreadable:
            self._skip_unreadable(row, error)
        return readable

    async def list_views(self) -> list[AccountView]:
        return [account.view() for account in await self.accounts()]

    async def generation(self) -> int:
        query = sa.select(tables.meta.c.value).where(tables.meta.c.name == tables.GENERATION)
        return int(await self._db.read(lambda db: db.scalar(query)) or 0)

    # -- account changes ----------------------------------------------------------

    async def add(
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
        credentials = {
            "label": label or account_id,
            "auth_method": auth_method,
            "refresh_token": self._secrets.seal(refresh_token),
            "client_id": client_id,
            "client_secret": self._secrets.seal(client_secret),
            "profile_arn": profile_arn,
            "access_token": self._secrets.seal(access_token),
            "expires_at": expires_at,
            "status": AccountStatus.ACTIVE.value,
            "status_detail": None,
            "region": region,
            "proxy_url": self._secrets.seal(proxy_url),  # its credentials, when it has some, are secrets
            "refreshed_at": now if access_token else None,
            "updated_at": now,
        }

        def write(db: sa.Connection) -> None:
            if first_row(db, _accounts_where(account_id)) is None:
                values = {"id": account_id, "created_at": now, "token_generation": 0, "enabled": True}
                db.execute(sa.insert(tables.accounts).values(**values, **credentials))
            else:  # a new login for a known account: its enabled flag stays the operator's
                generation = tables.accounts.c.token_generation + 1
                db.execute(_update_account(account_id).values(**credentials, token_generation=generation))

        await self._change(write)
        return await self._must_get(account_id)

    async def import_account(self, account: Account) -> None:
        values = {column.name: getattr(account, column.name, None) for column in tables.accounts.columns}
        values.update({name: self._secrets.seal(values[name]) for name in tables.SECRET_ACCOUNT_COLUMNS})
        values["status"] = account.status.value

        def write(db: sa.Connection) -> None:
            # The seed fingerprint belongs to this store's environment, not to the one the account came
            # from: a replaced row keeps its own, so a restart with the same env token keeps the copied
            # (newest) tokens, as the SQLite store always did.
            seeded = sa.select(tables.accounts.c.seed_fingerprint).where(tables.accounts.c.id == account.id)
            values["seed_fingerprint"] = db.scalar(seeded)
            db.execute(sa.delete(tables.accounts).where(tables.accounts.c.id == account.id))
            db.execute(sa.insert(tables.accounts).values(**values))

        await self._change(write)

    async def remove(self, account_id: str) -> bool:
        def write(db: sa.Connection) -> bool:
            for table in (tables.account_stats, tables.account_rests):
                db.execute(sa.delete(table).where(table.c.account_id == account_id))
            return affected_rows(db, sa.delete(tables.accounts).where(tables.accounts.c.id == account_id)) > 0

        return await self._change(write)

    async def update(self, account_id: str, *, enabled: bool | None = None, label: str | None = None) -> Account | None:
        """Switch an account on or off, or rename it; None when there is no such account."""
        changes: dict[str, Any] = {"updated_at": time.time()}
        if enabled is not None:
            changes["enabled"] = enabled
        if label is not None:
            changes["label"] = label
        await self._change(lambda db: db.execute(_update_account(account_id).values(**changes)))
        return await self.get(account_id)

    async def seed_from_env(self, env: EnvAccount) -> Account:
        """Create or update the environment account, keeping a token the upstream rotated since.

        The row remembers a fingerprint of the env token that seeded it. The same
        env token on a restart leaves the stored (possibly rotated) tokens alone;
        a changed env token means the operator logged in again, so it replaces them.
        Client registration and profile ARN follow the environment either way.
        """
        fingerprint = env.fingerprint()
        now = time.time()
        config: dict[str, Any] = {"auth_method": env.auth_method, "client_id": env.client_id, "updated_at": now}
        config["client_secret"] = self._secrets.seal(env.client_secret)
        config["proxy_url"] = self._secrets.seal(env.proxy_url)
        if env.profile_arn is not None:
            config["profile_arn"] = env.profile_arn
        tokens = {
            "refresh_token": self._secrets.seal(env.refresh_token),
            "access_token": self._secrets.seal(env.access_token),
            "expires_at": None,
            "seed_fingerprint": fingerprint,
        }

        def write(db: sa.Connection) -> None:
            row = first_row(db, _accounts_where(ENV_ACCOUNT_ID))
            if row is None:
                fresh: dict[str, Any] = {"id": ENV_ACCOUNT_ID, "label": env.label, "status": AccountStatus.ACTIVE.value}
                fresh |= {"created_at": now, "token_generation": 0, "enabled": True, "profile_arn": env.profile_arn}
                db.execute(sa.insert(tables.accounts).values(**fresh, **config, **tokens))
            elif row.seed_fingerprint != fingerprint:  # the operator logged in again: new tokens win
                generation = tables.accounts.c.token_generation + 1
                reset = {"status": AccountStatus.ACTIVE.value, "status_detail": None, "token_generation": generation}
                db.execute(_update_account(ENV_ACCOUNT_ID).values(**config, **tokens, **reset))
            elif self._config_differs(row, env):
                db.execute(_update_account(ENV_ACCOUNT_ID).values(**config))

        await self._change(write)
        return await self._must_get(ENV_ACCOUNT_ID)

    # -- tokens -------------------------------------------------------------------

    def refresh_lock(self, account_id: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Held by whoever refreshes `account_id`'s token: one holder across every process sharing the store."""
        return self._refresh_lock(account_id)

    async def save_tokens(
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
        changes: dict[str, Any] = {
            "access_token": self._secrets.seal(access_token),
            "expires_at": expires_at,
            "status": AccountStatus.ACTIVE.value,
            "status_detail": None,
            "token_generation": tables.accounts.c.token_generation + 1,
            "refreshed_at": now,
            "updated_at": now,
        }
        if refresh_token is not None:
            changes["refresh_token"] = self._secrets.seal(refresh_token)
        if profile_arn is not None:
            changes["profile_arn"] = profile_arn
        statement = _update_account(account_id).values(**changes)
        if if_generation is not None:
            statement = statement.where(tables.accounts.c.token_generation == if_generation)
        # The generation moves too: other workers adopt the token (and a cleared "needs login").
        updated = await self._change(lambda db: affected_rows(db, statement))
        return await self.get(account_id) if updated else None

    async def set_status(self, account_id: str, status: AccountStatus, detail: str | None = None) -> None:
        changes = {"status": status.value, "status_detail": detail, "updated_at": time.time()}
        await self._change(lambda db: db.execute(_update_account(account_id).values(**changes)))

    # -- plumbing -------------------------------------------------------------------

    def _account(self, row: sa.Row[Any]) -> Account:
        return Account(
            id=row.id,
            label=row.label,
            auth_method=row.auth_method,
            refresh_token=self._secrets.open(row.refresh_token),
            client_id=row.client_id,
            client_secret=self._secrets.open(row.client_secret),
            profile_arn=row.profile_arn,
            access_token=self._secrets.open(row.access_token),
            expires_at=row.expires_at,
            status=AccountStatus(row.status),
            status_detail=row.status_detail,
            token_generation=row.token_generation,
            created_at=row.created_at,
            updated_at=row.updated_at,
            refreshed_at=row.refreshed_at,
            enabled=bool(row.enabled),
            region=row.region,
            proxy_url=self._secrets.open(row.proxy_url),
        )

    def _skip_unreadable(self, row: sa.Row[Any], error: SecretKeyMismatch) -> None:
        """Log a row that does not decrypt once (not at every reload tick); the other accounts go on serving."""
        if row.id not in self._unreadable:
            self._unreadable.add(row.id)
            logger.error(f"account {row.id!r} ({row.label!r}) is skipped: {error}")

    def _config_differs(self, row: sa.Row[Any], env: EnvAccount) -> bool:
        return (
            row.auth_method != env.auth_method
            or row.client_id != env.client_id
            or self._secrets.open(row.client_secret) != env.client_secret
            or (env.profile_arn is not None and row.profile_arn != env.profile_arn)
            or self._secrets.open(row.proxy_url) != env.proxy_url
        )

    async def _must_get(self, account_id: str) -> Account:
        account = await self.get(account_id)
        if account is None:
            raise StoreUnavailable(f"account {account_id!r} vanished right after it was written")
        return account

    async def _change(self, work: Callable[[sa.Connection], T]) -> T:
        """An account change: the generation bump comes first, so its row lock orders every writer."""

        def bump_then_work(db: sa.Connection) -> T:
            generation = tables.meta.c.value + 1
            db.execute(sa.update(tables.meta).where(tables.meta.c.name == tables.GENERATION).values(value=generation))
            return work(db)

        return await self._db.write(bump_then_work)


class SqliteAccountStore(SqlAccountStore):
    """The store in one SQLite file of `data_dir`, shared by the `--workers` of one machine, on a
    database of its own (tests, and tools that want the accounts alone; a process that keeps other
    tables there opens the file once and puts the store on it: `account_store_on`, opening.py).

    Opening creates the directory (0700) and the file (0600), and migrates the
    file; it may wait for another worker's set-up (a file lock), so an event
    loop opens it in a thread.
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        busy_timeout: float = BUSY_TIMEOUT,
        chains: Sequence[MigrationChain] = DEFAULT_CHAINS,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / DB_FILENAME
        db = open_sqlite_file(self.data_dir, chains, busy_timeout=busy_timeout)
        super().__init__(db, PlainSecrets(), file_refresh_lock(self.data_dir), str(self.path.resolve()))


def file_refresh_lock(data_dir: Path) -> RefreshLock:
    """The SQLite store's refresh lock: an fcntl lock per account in the data directory, shared by the
    `--workers` of a machine, and released by the kernel when its process dies, however it dies."""

    def lock(account_id: str) -> contextlib.AbstractAsyncContextManager[None]:
        return exclusive_lock_async(data_dir / f"refresh-{_safe_name(account_id)}.lock")

    return lock


def _safe_name(account_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", account_id)[:64]


def _accounts_where(account_id: str) -> sa.Select[Any]:
    return sa.select(tables.accounts).where(tables.accounts.c.id == account_id)


def _update_account(account_id: str) -> sa.Update:
    return sa.update(tables.accounts).where(tables.accounts.c.id == account_id)
