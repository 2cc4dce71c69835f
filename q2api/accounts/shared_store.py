"""The shared account store: PostgreSQL or MySQL/MariaDB, for several gateway replicas.

Implements `AccountStore` (store_protocol.py) with SQLAlchemy Core's asyncio
extension over async drivers (asyncpg for PostgreSQL, aiomysql for
MySQL/MariaDB): a query waits on the event loop, never in a thread. Open it
with `SharedAccountStore.open` (it connects and migrates) inside the event
loop that will use it, and `close` it there.

Across replicas:

* every account change runs in one transaction that first bumps the store
  generation, whose row lock serialises account writers (no lost update, no
  duplicate seed) and tells every replica's reloader to re-read;
* a token refresh holds a database lock (database_locks.py) that dies with its
  connection, and the refresh result is committed before the lock is let go;
* refresh tokens, access tokens and client secrets are Fernet-encrypted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from typing import Any, TypeVar

import sqlalchemy as sa
from loguru import logger
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from q2api.accounts import shared_schema as tables
from q2api.accounts.database import Database, affected_rows, all_rows, first_row
from q2api.accounts.database_locks import DatabaseLocks, lock_namespace
from q2api.accounts.database_url import DatabaseUrl
from q2api.accounts.field_limits import check_account_fields
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
from q2api.accounts.secret_box import SecretBox, SecretKeyMismatch
from q2api.accounts.store_protocol import StoreUnavailable

T = TypeVar("T")
_SECRET_COLUMNS = ("refresh_token", "client_secret", "access_token", "proxy_url")
_LOCK_POLL_INTERVAL = 0.05  # seconds between attempts at a refresh lock another replica holds


class SharedAccountStore:
    def __init__(self, db: Database, locks: DatabaseLocks, secrets: SecretBox) -> None:
        """Use `open`, which connects and migrates first."""
        self._db = db
        self._locks = locks
        self._secrets = secrets
        self._kind = db.url.kind
        self._unreadable: set[str] = set()  # ids of the rows skipped (and logged) because they do not decrypt

    @classmethod
    async def open(cls, url: DatabaseUrl, secrets: SecretBox) -> SharedAccountStore:
        """Connect and bring the schema up to date (raises StoreUnavailable, SchemaTooNew)."""
        db = Database(url)
        try:
            with db.failures():
                # The first contact is bounded like any unit of work: a server that accepts the connection
                # and never answers is a clear error at start-up, not a hang (aiomysql's connect_timeout
                # covers the TCP connect only).
                async with db.bounded(), db.engine.connect() as connection:
                    locks = DatabaseLocks(url.kind, await lock_namespace(connection, url.kind))
                migration_bound = tables.MIGRATION_LOCK_TIMEOUT + db.deadline  # it may wait for another replica's
                try:
                    async with asyncio.timeout(migration_bound):
                        await tables.migrate(db.engine, locks)
                except TimeoutError:
                    raise StoreUnavailable(
                        f"the shared store {url.masked} did not finish its migration within {migration_bound:g}s"
                    ) from None
        except BaseException:
            await db.dispose()
            raise
        return cls(db, locks, secrets)

    @property
    def location(self) -> str:
        return self._db.url.masked

    @property
    def database(self) -> Database:
        """Its connections, for the stores that share its database (q2api.accounts.shared_responses)."""
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

        async def write(db: AsyncConnection) -> None:
            existing = await first_row(db, _accounts_where(account_id))
            if existing is None:
                values = {"id": account_id, "created_at": now, "token_generation": 0, "enabled": True}
                await db.execute(sa.insert(tables.accounts).values(**values, **credentials))
            else:  # a new login for a known account: its enabled flag stays the operator's
                generation = tables.accounts.c.token_generation + 1
                await db.execute(_update_account(account_id).values(**credentials, token_generation=generation))

        await self._change(write)
        return await self._must_get(account_id)

    async def import_account(self, account: Account) -> None:
        values = {column.name: getattr(account, column.name, None) for column in tables.accounts.columns}
        values.update({name: self._secrets.seal(values[name]) for name in _SECRET_COLUMNS})
        values["status"] = account.status.value
        values["seed_fingerprint"] = None  # it belongs to the environment of the store it came from

        async def write(db: AsyncConnection) -> None:
            await db.execute(sa.delete(tables.accounts).where(tables.accounts.c.id == account.id))
            await db.execute(sa.insert(tables.accounts).values(**values))

        await self._change(write)

    async def remove(self, account_id: str) -> bool:
        async def write(db: AsyncConnection) -> bool:
            for table in (tables.account_stats, tables.account_rests):
                await db.execute(sa.delete(table).where(table.c.account_id == account_id))
            return await affected_rows(db, sa.delete(tables.accounts).where(tables.accounts.c.id == account_id)) > 0

        return await self._change(write)

    async def update(self, account_id: str, *, enabled: bool | None = None, label: str | None = None) -> Account | None:
        changes: dict[str, Any] = {"updated_at": time.time()}
        if enabled is not None:
            changes["enabled"] = enabled
        if label is not None:
            changes["label"] = label
        await self._change(lambda db: db.execute(_update_account(account_id).values(**changes)))
        return await self.get(account_id)

    async def seed_from_env(self, env: EnvAccount) -> Account:
        """As SqliteAccountStore.seed_from_env: a rotated token survives a restart with the same env token."""
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

        async def write(db: AsyncConnection) -> None:
            row = await first_row(db, _accounts_where(ENV_ACCOUNT_ID))
            if row is None:
                fresh: dict[str, Any] = {"id": ENV_ACCOUNT_ID, "label": env.label, "status": AccountStatus.ACTIVE.value}
                fresh |= {"created_at": now, "token_generation": 0, "enabled": True, "profile_arn": env.profile_arn}
                await db.execute(sa.insert(tables.accounts).values(**fresh, **config, **tokens))
            elif row.seed_fingerprint != fingerprint:  # the operator logged in again: new tokens win
                generation = tables.accounts.c.token_generation + 1
                reset = {"status": AccountStatus.ACTIVE.value, "status_detail": None, "token_generation": generation}
                await db.execute(_update_account(ENV_ACCOUNT_ID).values(**config, **tokens, **reset))
            elif self._config_differs(row, env):
                await db.execute(_update_account(ENV_ACCOUNT_ID).values(**config))

        await self._change(write)
        return await self._must_get(ENV_ACCOUNT_ID)

    # -- tokens -------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def refresh_lock(self, account_id: str) -> AsyncIterator[None]:
        name = f"refresh:{account_id}"
        # Closing the (unpooled) connection at the block's end ends the database session and so the lock.
        async with self._db.lock_connection() as connection:
            # Polled, not waited for in the database: a waiting statement could not be cancelled cleanly.
            while not await self._try_lock(connection, name):  # noqa: ASYNC110
                await asyncio.sleep(_LOCK_POLL_INTERVAL)
            yield

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
        updated = await self._change(lambda db: affected_rows(db, statement))
        return await self.get(account_id) if updated else None

    async def set_status(self, account_id: str, status: AccountStatus, detail: str | None = None) -> None:
        changes = {"status": status.value, "status_detail": detail, "updated_at": time.time()}
        await self._change(lambda db: db.execute(_update_account(account_id).values(**changes)))

    # -- shared counters and cool-downs ------------------------------------------

    async def add_stats(self, pending: Mapping[str, StatsDelta]) -> None:
        if not pending:
            return
        stats = tables.account_stats

        async def write(db: AsyncConnection) -> None:
            wanted = sa.select(tables.accounts.c.id).where(tables.accounts.c.id.in_(list(pending)))
            known = set(await db.scalars(wanted))
            for account_id in sorted(known):  # one order for every writer: no deadlock between them
                delta = pending[account_id]
                row: dict[str, Any] = {"account_id": account_id, "requests": delta.requests, "failures": delta.failures}
                row |= {"last_error": delta.last_error, "last_used_at": delta.last_used_at}
                await db.execute(self._upsert(stats, row, self._stats_merge))

        await self._db.write(write)

    async def read_stats(self) -> dict[str, AccountStats]:
        rows = await self._db.read(lambda db: all_rows(db, sa.select(tables.account_stats)))
        return {
            row.account_id: AccountStats(row.requests, row.failures, row.last_error, row.last_used_at) for row in rows
        }

    async def add_rests(self, rests: Mapping[str, AccountRest]) -> None:
        table = tables.account_rests

        async def write(db: AsyncConnection) -> None:
            for account_id in sorted(rests):
                rest = rests[account_id]
                await db.execute(sa.delete(table).where(table.c.account_id == account_id, table.c.until < rest.until))
                present = await first_row(db, sa.select(table.c.until).where(table.c.account_id == account_id))
                if present is None:
                    values = {"account_id": account_id, "until": rest.until, "reason": rest.reason}
                    await db.execute(sa.insert(table).values(**values))

        if rests:
            await self._db.write(write)

    async def clear_rests(self, account_ids: Collection[str]) -> None:
        table = tables.account_rests
        statement = sa.delete(table).where(table.c.account_id.in_(sorted(account_ids)))
        if account_ids:
            await self._db.write(lambda db: db.execute(statement))

    async def read_rests(self) -> dict[str, AccountRest]:
        table = tables.account_rests
        rows = await self._db.read(lambda db: all_rows(db, sa.select(table).where(table.c.until > time.time())))
        return {row.account_id: AccountRest(row.until, row.reason) for row in rows}

    # -- device-code logins ---------------------------------------------------------

    async def record_login(self, login_id: str, label: str, method: str, expires_in: float) -> None:
        now = time.time()
        record: dict[str, Any] = {"id": login_id, "label": label, "method": method, "status": LoginStatus.PENDING.value}
        record |= {"expires_at": now + expires_in, "created_at": now}

        async def write(db: AsyncConnection) -> None:
            await db.execute(sa.insert(tables.logins).values(**record))
            await db.execute(sa.delete(tables.logins).where(tables.logins.c.created_at < now - LOGIN_RECORD_LIFETIME))

        await self._db.write(write)

    async def finish_login(
        self, login_id: str, status: LoginStatus, account_id: str | None = None, detail: str | None = None
    ) -> None:
        statement = sa.update(tables.logins).where(tables.logins.c.id == login_id)
        changes = {"status": status.value, "account_id": account_id, "detail": detail}
        await self._db.write(lambda db: db.execute(statement.values(**changes)))

    async def read_login(self, login_id: str) -> LoginRecord | None:
        query = sa.select(tables.logins).where(tables.logins.c.id == login_id)
        row = await self._db.read(lambda db: first_row(db, query))
        if row is None:
            return None
        return login_record(row.id, row.label, row.method, row.status, row.account_id, row.detail, row.expires_at)

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

    def _upsert(
        self, table: sa.Table, row: dict[str, Any], merge: Callable[[Any, Any], dict[str, Any]]
    ) -> sa.Executable:
        if self._kind == "postgresql":
            insert = postgresql.insert(table).values(**row)
            return insert.on_conflict_do_update(index_elements=["account_id"], set_=merge(table.c, insert.excluded))
        mysql_insert = mysql.insert(table).values(**row)
        return mysql_insert.on_duplicate_key_update(**merge(table.c, mysql_insert.inserted))

    def _stats_merge(self, current: Any, new: Any) -> dict[str, Any]:
        greatest = sa.func.greatest(sa.func.coalesce(current.last_used_at, 0), sa.func.coalesce(new.last_used_at, 0))
        return {
            "requests": current.requests + new.requests,
            "failures": current.failures + new.failures,
            "last_error": sa.func.coalesce(new.last_error, current.last_error),
            "last_used_at": greatest,
        }

    async def _change(self, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """An account change: the generation bump comes first, so its row lock orders every writer."""

        async def bump_then_work(db: AsyncConnection) -> T:
            generation = tables.meta.c.value + 1
            bump = sa.update(tables.meta).where(tables.meta.c.name == tables.GENERATION).values(value=generation)
            await db.execute(bump)
            return await work(db)

        return await self._db.write(bump_then_work)

    async def _try_lock(self, connection: AsyncConnection, name: str) -> bool:
        with self._db.failures():
            async with self._db.bounded():
                return await self._locks.try_acquire(connection, name)


def _accounts_where(account_id: str) -> sa.Select[Any]:
    return sa.select(tables.accounts).where(tables.accounts.c.id == account_id)


def _update_account(account_id: str) -> sa.Update:
    return sa.update(tables.accounts).where(tables.accounts.c.id == account_id)
