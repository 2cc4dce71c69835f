"""Where each conversation is pinned: which account served its last turn, shared by every worker and replica.

A pin is a conversation's key (q2api.frontdoors.session_key: a digest, never the client's id or
text) → an account id (and how many of the conversation's first history messages another account
served before it moved there: q2api.amazonq.turn_affinity), forgotten once the conversation has been idle for the affinity time
(`Q2API_SESSION_AFFINITY_SECONDS`). Two places keep them: Redis when `Q2API_REDIS_URL` is set
(redis_session_pins.py), else the store's database (`q2api_session_pins`, its own migration chain).

A turn costs one round trip: `find` (which, in Redis, also renews the idle time). `keep` writes only
when the pin changes (a new conversation, a moved one) or, in the database, when its idle time is
worth renewing (`Pin.stale`: after a tenth of it) — a database row is not renewed on every read.
The lookup is not cached in the process: a pin another worker or replica moved (its account
failed there) would be missed, and the turn sent back to the account that no longer holds the
conversation's latest signatures. What is kept locally is only what is safe: a process's own pin
write of a conversation is waited for before that conversation's next lookup (session_affinity.py),
and a one-account pool looks nothing up.

A pin store that does not answer degrades to "no pin" (the turn goes where the pool sends it),
never to a failed request; the WARNING says so once a minute at most.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa

from q2api.store.database import StoreDatabase
from q2api.store.migrations import Migration, MigrationChain, bookkeeping_table, create

metadata = sa.MetaData()

session_pins = sa.Table(
    "q2api_session_pins",
    metadata,
    sa.Column("pin_key", sa.String(64), primary_key=True),  # the conversation key's digest
    sa.Column("account_id", sa.String(64), nullable=False),
    sa.Column("foreign_history", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("expires_at", sa.Double(), nullable=False, index=True),  # epoch seconds
)

SESSION_PIN_MIGRATIONS = MigrationChain(
    "session_pins",
    bookkeeping_table("q2api_session_pin_migrations", sa.MetaData()),
    (Migration(1, "conversations pinned to the account that served them", create(session_pins)),),
)

RENEW_AFTER_SHARE = 0.1  # a database pin's idle time is renewed once this share of it has passed
PURGE_EVERY = 600.0  # seconds between two deletions of expired database pins, per process


@dataclass(frozen=True, slots=True)
class Pin:
    account_id: str
    foreign_history: int = 0  # the first history messages whose reasoning another account made
    stale: bool = False  # its idle time is due to be renewed when the turn is kept on it


class SessionPins(Protocol):
    async def find(self, key: str) -> Pin | None:
        """The account `key` is pinned to (None: none, or expired); raises on a store that fails."""
        ...

    async def keep(self, key: str, pin: Pin, found: Pin | None) -> None:
        """`pin` is where `key`'s turn was served (`found`: what `find` said before it)."""
        ...

    async def close(self) -> None: ...


def needs_write(pin: Pin, found: Pin | None) -> bool:
    return (
        found is None
        or found.account_id != pin.account_id
        or found.foreign_history != pin.foreign_history
        or found.stale
    )


class StoreSessionPins:
    """Pins in the store's database (SQLite, PostgreSQL or MySQL)."""

    def __init__(self, database: StoreDatabase, idle_seconds: float) -> None:
        self._db = database
        self._idle = idle_seconds
        self._next_purge = time.monotonic() + PURGE_EVERY

    async def find(self, key: str) -> Pin | None:
        now = time.time()

        def read(db: sa.Connection) -> Any:
            columns = (session_pins.c.account_id, session_pins.c.foreign_history, session_pins.c.expires_at)
            query = sa.select(*columns).where(session_pins.c.pin_key == key, session_pins.c.expires_at > now)
            return db.execute(query).first()

        row = await self._db.read(read)
        if row is None:
            return None
        stale = row.expires_at - now < self._idle * (1 - RENEW_AFTER_SHARE)
        return Pin(str(row.account_id), int(row.foreign_history), stale=stale)

    async def keep(self, key: str, pin: Pin, found: Pin | None) -> None:
        if not needs_write(pin, found):
            return
        now = time.time()
        purge = time.monotonic() >= self._next_purge
        if purge:
            self._next_purge = time.monotonic() + PURGE_EVERY

        def write(db: sa.Connection) -> None:
            db.execute(_upsert(db.dialect.name, key, pin, now + self._idle))
            if purge:
                db.execute(sa.delete(session_pins).where(session_pins.c.expires_at <= now))

        # A pin is worth less than an fsync: losing the last ones to a power cut moves a few conversations.
        await self._db.write(write, durable=False)

    async def close(self) -> None:
        """Nothing of its own: the database is the gateway's."""


def _upsert(dialect: str, key: str, pin: Pin, expires_at: float) -> sa.Executable:
    """One statement that inserts the pin or replaces the one there (two workers may pin one key at once)."""
    update = {"account_id": pin.account_id, "foreign_history": pin.foreign_history, "expires_at": expires_at}
    values = {"pin_key": key, **update}
    # Each dialect imported when its database is the store's: a worker does not keep the others (issue 33).
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        pg = postgresql.insert(session_pins).values(values)
        return pg.on_conflict_do_update(index_elements=[session_pins.c.pin_key], set_=update)
    if dialect in ("mysql", "mariadb"):
        from sqlalchemy.dialects import mysql

        return mysql.insert(session_pins).values(values).on_duplicate_key_update(update)
    from sqlalchemy.dialects import sqlite

    lite = sqlite.insert(session_pins).values(values)
    return lite.on_conflict_do_update(index_elements=[session_pins.c.pin_key], set_=update)
