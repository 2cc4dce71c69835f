"""The shared account store: PostgreSQL or MySQL/MariaDB, for several gateway replicas.

Implements `AccountStore` (store_protocol.py) with SQLAlchemy Core over
synchronous drivers (psycopg 3, PyMySQL): every store call already runs in a
thread (`asyncio.to_thread`), exactly like the SQLite store, so one code path
serves both and the CLI uses the store without an event loop.

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
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql

from q2api.amazonq.accounts import shared_schema as tables
from q2api.amazonq.accounts.database import Database
from q2api.amazonq.accounts.database_locks import DatabaseLocks, lock_namespace
from q2api.amazonq.accounts.database_url import DatabaseUrl
from q2api.amazonq.accounts.records import (
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
    login_record,
)
from q2api.amazonq.accounts.secret_box import SecretBox
from q2api.amazonq.accounts.store_protocol import StoreUnavailable

T = TypeVar("T")
_SECRET_COLUMNS = ("refresh_token", "client_secret", "access_token")
_LOCK_POLL_INTERVAL = 0.05  # seconds between attempts at a refresh lock another replica holds


class SharedAccountStore:
    def __init__(self, url: DatabaseUrl, secrets: SecretBox) -> None:
        """Connect and bring the schema up to date (raises StoreUnavailable, SchemaTooNew)."""
        self._secrets = secrets
        self._kind = url.kind
        self._db = Database(url)
        with self._db.failures():
            with self._db.engine.connect() as connection:
                self._locks = DatabaseLocks(self._kind, lock_namespace(connection, self._kind))
            tables.migrate(self._db.engine, self._locks)

    @property
    def location(self) -> str:
        return self._db.url.masked

    def close(self) -> None:
        self._db.dispose()

    # -- reading ----------------------------------------------------------------

    def get(self, account_id: str) -> Account | None:
        row = self._db.read(lambda db: db.execute(_accounts_where(account_id)).first())
        return self._account(row) if row is not None else None

    def accounts(self) -> list[Account]:
        query = sa.select(tables.accounts).order_by(tables.accounts.c.created_at, tables.accounts.c.id)
        rows = self._db.read(lambda db: db.execute(query).all())
        return [self._account(row) for row in rows]

    def list_views(self) -> list[AccountView]:
        return [account.view() for account in self.accounts()]

    def generation(self) -> int:
        query = sa.select(tables.meta.c.value).where(tables.meta.c.name == tables.GENERATION)
        return int(self._db.read(lambda db: db.execute(query).scalar()) or 0)

    # -- account changes ----------------------------------------------------------

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
        if auth_method not in ("idc", "social"):
            raise ValueError(f"auth method must be 'idc' or 'social', not {auth_method!r}")
        if auth_method == "idc" and not (client_id and client_secret):
            raise ValueError("an IdC account needs its OIDC client id and client secret")
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
            "refreshed_at": now if access_token else None,
            "updated_at": now,
        }

        def write(db: sa.Connection) -> None:
            existing = db.execute(_accounts_where(account_id)).first()
            if existing is None:
                values = {"id": account_id, "created_at": now, "token_generation": 0, "enabled": True}
                db.execute(sa.insert(tables.accounts).values(**values, **credentials))
            else:  # a new login for a known account: its enabled flag stays the operator's
                generation = tables.accounts.c.token_generation + 1
                db.execute(_update_account(account_id).values(**credentials, token_generation=generation))

        self._change(write)
        return self._must_get(account_id)

    def import_account(self, account: Account) -> None:
        values = {column.name: getattr(account, column.name, None) for column in tables.accounts.columns}
        values.update({name: self._secrets.seal(values[name]) for name in _SECRET_COLUMNS})
        values["status"] = account.status.value
        values["seed_fingerprint"] = None  # it belongs to the environment of the store it came from

        def write(db: sa.Connection) -> None:
            db.execute(sa.delete(tables.accounts).where(tables.accounts.c.id == account.id))
            db.execute(sa.insert(tables.accounts).values(**values))

        self._change(write)

    def remove(self, account_id: str) -> bool:
        def write(db: sa.Connection) -> bool:
            for table in (tables.account_stats, tables.account_rests):
                db.execute(sa.delete(table).where(table.c.account_id == account_id))
            return db.execute(sa.delete(tables.accounts).where(tables.accounts.c.id == account_id)).rowcount > 0

        return self._change(write)

    def update(self, account_id: str, *, enabled: bool | None = None, label: str | None = None) -> Account | None:
        changes: dict[str, Any] = {"updated_at": time.time()}
        if enabled is not None:
            changes["enabled"] = enabled
        if label is not None:
            changes["label"] = label
        self._change(lambda db: db.execute(_update_account(account_id).values(**changes)))
        return self.get(account_id)

    def seed_from_env(self, env: EnvAccount) -> Account:
        """As SqliteAccountStore.seed_from_env: a rotated token survives a restart with the same env token."""
        fingerprint = env.fingerprint()
        now = time.time()
        config: dict[str, Any] = {"auth_method": env.auth_method, "client_id": env.client_id, "updated_at": now}
        config["client_secret"] = self._secrets.seal(env.client_secret)
        if env.profile_arn is not None:
            config["profile_arn"] = env.profile_arn
        tokens = {
            "refresh_token": self._secrets.seal(env.refresh_token),
            "access_token": self._secrets.seal(env.access_token),
            "expires_at": None,
            "seed_fingerprint": fingerprint,
        }

        def write(db: sa.Connection) -> None:
            row = db.execute(_accounts_where(ENV_ACCOUNT_ID)).first()
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

        self._change(write)
        return self._must_get(ENV_ACCOUNT_ID)

    # -- tokens -------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def refresh_lock(self, account_id: str) -> AsyncIterator[None]:
        name = f"refresh:{account_id}"
        connection = await asyncio.to_thread(self._db.connect_for_lock)
        try:
            # Polled, not waited for in the database: a blocking wait would hold a thread per waiter.
            while not await asyncio.to_thread(self._try_lock, connection, name):  # noqa: ASYNC110
                await asyncio.sleep(_LOCK_POLL_INTERVAL)
            yield
        finally:
            # Closing the (unpooled) connection ends the database session and so the lock,
            # even when the release itself fails.
            await asyncio.to_thread(connection.close)

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
        updated = self._change(lambda db: db.execute(statement).rowcount)
        return self.get(account_id) if updated else None

    def set_status(self, account_id: str, status: AccountStatus, detail: str | None = None) -> None:
        changes = {"status": status.value, "status_detail": detail, "updated_at": time.time()}
        self._change(lambda db: db.execute(_update_account(account_id).values(**changes)))

    # -- shared counters and cool-downs ------------------------------------------

    def add_stats(self, pending: Mapping[str, StatsDelta]) -> None:
        if not pending:
            return
        stats = tables.account_stats

        def write(db: sa.Connection) -> None:
            known = set(db.scalars(sa.select(tables.accounts.c.id).where(tables.accounts.c.id.in_(list(pending)))))
            for account_id in sorted(known):  # one order for every writer: no deadlock between them
                delta = pending[account_id]
                row: dict[str, Any] = {"account_id": account_id, "requests": delta.requests, "failures": delta.failures}
                row |= {"last_error": delta.last_error, "last_used_at": delta.last_used_at}
                db.execute(self._upsert(stats, row, self._stats_merge))

        self._db.write(write)

    def read_stats(self) -> dict[str, AccountStats]:
        rows = self._db.read(lambda db: db.execute(sa.select(tables.account_stats)).all())
        return {
            row.account_id: AccountStats(row.requests, row.failures, row.last_error, row.last_used_at) for row in rows
        }

    def add_rests(self, rests: Mapping[str, AccountRest]) -> None:
        table = tables.account_rests

        def write(db: sa.Connection) -> None:
            for account_id in sorted(rests):
                rest = rests[account_id]
                db.execute(sa.delete(table).where(table.c.account_id == account_id, table.c.until < rest.until))
                present = db.execute(sa.select(table.c.until).where(table.c.account_id == account_id)).first()
                if present is None:
                    db.execute(sa.insert(table).values(account_id=account_id, until=rest.until, reason=rest.reason))

        if rests:
            self._db.write(write)

    def clear_rests(self, account_ids: Collection[str]) -> None:
        table = tables.account_rests
        if account_ids:
            self._db.write(lambda db: db.execute(sa.delete(table).where(table.c.account_id.in_(sorted(account_ids)))))

    def read_rests(self) -> dict[str, AccountRest]:
        table = tables.account_rests
        rows = self._db.read(lambda db: db.execute(sa.select(table).where(table.c.until > time.time())).all())
        return {row.account_id: AccountRest(row.until, row.reason) for row in rows}

    # -- device-code logins ---------------------------------------------------------

    def record_login(self, login_id: str, label: str, method: str, expires_in: float) -> None:
        now = time.time()
        record: dict[str, Any] = {"id": login_id, "label": label, "method": method, "status": LoginStatus.PENDING.value}
        record |= {"expires_at": now + expires_in, "created_at": now}

        def write(db: sa.Connection) -> None:
            db.execute(sa.insert(tables.logins).values(**record))
            db.execute(sa.delete(tables.logins).where(tables.logins.c.created_at < now - LOGIN_RECORD_LIFETIME))

        self._db.write(write)

    def finish_login(
        self, login_id: str, status: LoginStatus, account_id: str | None = None, detail: str | None = None
    ) -> None:
        statement = sa.update(tables.logins).where(tables.logins.c.id == login_id)
        changes = {"status": status.value, "account_id": account_id, "detail": detail}
        self._db.write(lambda db: db.execute(statement.values(**changes)))

    def read_login(self, login_id: str) -> LoginRecord | None:
        query = sa.select(tables.logins).where(tables.logins.c.id == login_id)
        row = self._db.read(lambda db: db.execute(query).first())
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
        )

    def _config_differs(self, row: sa.Row[Any], env: EnvAccount) -> bool:
        return (
            row.auth_method != env.auth_method
            or row.client_id != env.client_id
            or self._secrets.open(row.client_secret) != env.client_secret
            or (env.profile_arn is not None and row.profile_arn != env.profile_arn)
        )

    def _must_get(self, account_id: str) -> Account:
        account = self.get(account_id)
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

    def _change(self, work: Callable[[sa.Connection], T]) -> T:
        """An account change: the generation bump comes first, so its row lock orders every writer."""

        def bump_then_work(db: sa.Connection) -> T:
            generation = tables.meta.c.value + 1
            db.execute(sa.update(tables.meta).where(tables.meta.c.name == tables.GENERATION).values(value=generation))
            return work(db)

        return self._db.write(bump_then_work)

    def _try_lock(self, connection: sa.Connection, name: str) -> bool:
        with self._db.failures():
            return self._locks.try_acquire(connection, name)


def _accounts_where(account_id: str) -> sa.Select[Any]:
    return sa.select(tables.accounts).where(tables.accounts.c.id == account_id)


def _update_account(account_id: str) -> sa.Update:
    return sa.update(tables.accounts).where(tables.accounts.c.id == account_id)
