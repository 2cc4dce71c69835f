"""Client keys kept in the store: what a key is allowed, and the operations on it.

A key is 32 random bytes (`q2k_` + URL-safe base64) and only its SHA-256 is stored. A fast hash is
the right one here: a slow one (bcrypt, argon2) protects a password a person chose, whose few bits
an attacker can guess through; 256 random bits cannot be guessed whatever the hash costs, and a slow
hash would cost every request its time. The digest is also how a request finds its key (an indexed
lookup), so no key is ever compared with another.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import math
import re
import secrets
import time
from collections.abc import Sequence
from typing import Any

import orjson
import sqlalchemy as sa

from q2api.store.database import StoreDatabase
from q2api.tenants.tables import client_keys, key_leases, key_windows

KEY_PREFIX = "q2k_"
_SHOWN_PREFIX_CHARS = 10  # `q2k_` and six characters: enough to tell keys apart in a list
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._@:/+-]{0,63}$")
_RELATIVE = re.compile(r"^(\d{1,5})([dh])$")


class KeyProblem(ValueError):
    """A key operation refused: a bad value (naming the field) or a clash (the label is taken)."""

    def __init__(self, field: str, message: str, *, conflict: bool = False, missing: bool = False) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.conflict = conflict
        self.missing = missing


@dataclasses.dataclass(frozen=True, slots=True)
class KeyLimits:
    """A key's limits; None is no limit."""

    models: tuple[str, ...] | None = None
    expires_at: float | None = None
    rpm: int | None = None
    tpm: int | None = None
    max_concurrent: int | None = None
    credits_per_day: float | None = None
    credits_per_month: float | None = None


LIMIT_FIELDS = tuple(field.name for field in dataclasses.fields(KeyLimits))


@dataclasses.dataclass(frozen=True, slots=True)
class KeyRecord:
    id: str
    label: str
    key_prefix: str
    limits: KeyLimits
    created_at: float
    updated_at: float
    revoked_at: float | None = None

    def expired(self, now: float) -> bool:
        return self.limits.expires_at is not None and now >= self.limits.expires_at

    def status(self, now: float) -> str:
        """`revoked`, `expired` or `active`, as the admin API and `q2api keys` show it (revoked wins)."""
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expired(now) else "active"

    def as_dict(self) -> dict[str, Any]:
        """The key as the admin API and `q2api keys show --json` give it (never the key itself)."""
        return {
            "id": self.id,
            "label": self.label,
            "key_prefix": self.key_prefix,
            **{name: getattr(self.limits, name) for name in LIMIT_FIELDS},
            "models": list(self.limits.models) if self.limits.models is not None else None,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "revoked_at": self.revoked_at,
        }


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


# ---------------------------------------------------------------- reading what an operator types


def check_label(label: str) -> str:
    label = label.strip()
    if not _LABEL.match(label):
        raise KeyProblem("label", "1 to 64 characters: letters, digits and ' ._@:/+-', starting with a letter or digit")
    return label


def parse_expiry(text: str, now: float | None = None) -> float:
    """`2027-01-01` (midnight UTC), an RFC 3339 time, or `30d` / `12h` from now → epoch seconds."""
    now = time.time() if now is None else now
    text = text.strip()
    relative = _RELATIVE.match(text)
    if relative:
        amount, unit = int(relative.group(1)), relative.group(2)
        if amount == 0:
            raise KeyProblem("expires", "must be in the future")
        return now + amount * (86400 if unit == "d" else 3600)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise KeyProblem(
            "expires", f"{text!r} is neither a date (2027-01-01), a time, nor a duration (30d, 12h)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def parse_models(text: str) -> tuple[str, ...]:
    models = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not models:
        raise KeyProblem("models", "name at least one model (comma-separated), or leave it out for every model")
    if any(len(name) > 200 for name in models):
        raise KeyProblem("models", "a model id longer than 200 characters")
    return models


def check_limit(field: str, value: float | None, kind: type[int] | type[float]) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise KeyProblem(field, "must be a positive number")
    # Only a float can be NaN or infinite; `math.isnan` of an integer past a float's range raises.
    if isinstance(value, float) and not math.isfinite(value):
        raise KeyProblem(field, "must be a finite number")
    if kind is int:
        if value != int(value) or value > 2**31 - 1:
            raise KeyProblem(field, "must be a whole number below 2147483648")
        return int(value)
    if value > 1e12:
        raise KeyProblem(field, "is too large")
    return float(value)


def checked_limits(limits: KeyLimits) -> KeyLimits:
    """`limits` with each value checked (raises KeyProblem naming the field)."""
    return KeyLimits(
        models=limits.models,
        expires_at=limits.expires_at,
        rpm=check_limit("rpm", limits.rpm, int),  # type: ignore[arg-type]
        tpm=check_limit("tpm", limits.tpm, int),  # type: ignore[arg-type]
        max_concurrent=check_limit("max_concurrent", limits.max_concurrent, int),  # type: ignore[arg-type]
        credits_per_day=check_limit("credits_per_day", limits.credits_per_day, float),
        credits_per_month=check_limit("credits_per_month", limits.credits_per_month, float),
    )


# ---------------------------------------------------------------- the store


def limits_as_given(
    *,
    models: str | None,
    expires: str | None,
    rpm: int | None,
    tpm: int | None,
    max_concurrent: int | None,
    credits_per_day: float | None,
    credits_per_month: float | None,
) -> KeyLimits:
    """A new key's limits as an operator gives them (`q2api keys create`, `POST /admin/api/keys`): models
    comma-separated and an expiry as `parse_expiry` reads it, as text; None is no limit."""
    return KeyLimits(
        models=parse_models(models) if models is not None else None,
        expires_at=parse_expiry(expires) if expires is not None else None,
        rpm=rpm,
        tpm=tpm,
        max_concurrent=max_concurrent,
        credits_per_day=credits_per_day,
        credits_per_month=credits_per_month,
    )


def _record(row: sa.Row[Any]) -> KeyRecord:
    models = orjson.loads(row.models) if row.models is not None else None
    return KeyRecord(
        id=row.id,
        label=row.label,
        key_prefix=row.key_prefix,
        limits=KeyLimits(
            models=tuple(models) if models is not None else None,
            expires_at=row.expires_at,
            rpm=row.rpm,
            tpm=row.tpm,
            max_concurrent=row.max_concurrent,
            credits_per_day=row.credits_per_day,
            credits_per_month=row.credits_per_month,
        ),
        created_at=row.created_at,
        updated_at=row.updated_at,
        revoked_at=row.revoked_at,
    )


def _limit_values(limits: KeyLimits) -> dict[str, Any]:
    values = {name: getattr(limits, name) for name in LIMIT_FIELDS}
    values["models"] = orjson.dumps(list(limits.models)).decode() if limits.models is not None else None
    return values


def _find(db: sa.Connection, id_or_label: str) -> KeyRecord:
    """The key with this id or label (raises KeyProblem marked `missing`)."""
    by_id_or_label = sa.or_(client_keys.c.id == id_or_label, client_keys.c.label == id_or_label)
    row = db.execute(sa.select(client_keys).where(by_id_or_label)).first()
    if row is None:
        raise KeyProblem("key", f"no key has the id or label {id_or_label!r}", missing=True)
    return _record(row)


def _check_label_free(db: sa.Connection, label: str) -> None:
    if db.execute(sa.select(client_keys.c.id).where(client_keys.c.label == label)).first() is not None:
        raise KeyProblem("label", f"a key labelled {label!r} exists already", conflict=True)


def _write_label(db: sa.Connection, label: str, statement: sa.Executable) -> None:
    """Run `statement`, which gives a key `label`, checked free in this transaction just before.

    On PostgreSQL and MySQL another transaction (a second operator, another replica) may take the
    label in between: the unique index then refuses this statement, and that is the same conflict as
    the check's (a 409), not a fault of the store (a 503). The savepoint keeps the transaction usable
    to look again, so that any other refusal stays what it is.
    """
    try:
        with db.begin_nested():
            db.execute(statement)
    except sa.exc.IntegrityError:
        _check_label_free(db, label)
        raise


class KeyStore:
    """The keys in the store (SQLite or the shared database)."""

    def __init__(self, database: StoreDatabase) -> None:
        self.database = database

    async def create(self, label: str, limits: KeyLimits) -> tuple[str, KeyRecord]:
        """A new key and its record; the key is returned here once and never stored."""
        label = check_label(label)
        limits = checked_limits(limits)
        key = new_key()
        now = time.time()
        record = KeyRecord(
            id="key_" + secrets.token_hex(8),
            label=label,
            key_prefix=key[:_SHOWN_PREFIX_CHARS],
            limits=limits,
            created_at=now,
            updated_at=now,
        )

        def insert(db: sa.Connection) -> None:
            _check_label_free(db, label)
            statement = sa.insert(client_keys).values(
                id=record.id,
                label=label,
                key_hash=key_digest(key),
                key_prefix=record.key_prefix,
                created_at=now,
                updated_at=now,
                **_limit_values(limits),
            )
            _write_label(db, label, statement)

        await self.database.write(insert)
        return key, record

    async def list(self, *, include_revoked: bool = True) -> list[KeyRecord]:
        def select(db: sa.Connection) -> list[KeyRecord]:
            query = sa.select(client_keys).order_by(client_keys.c.created_at)
            if not include_revoked:
                query = query.where(client_keys.c.revoked_at.is_(None))
            return [_record(row) for row in db.execute(query)]

        return await self.database.read(select)

    async def find(self, id_or_label: str) -> KeyRecord:
        """The key with this id or label (raises KeyProblem marked `missing`)."""
        return await self.database.read(lambda db: _find(db, id_or_label))

    async def by_digest(self, digest: str) -> KeyRecord | None:
        def select(db: sa.Connection) -> KeyRecord | None:
            row = db.execute(sa.select(client_keys).where(client_keys.c.key_hash == digest)).first()
            return _record(row) if row is not None else None

        return await self.database.read(select)

    async def count_usable(self, now: float | None = None) -> int:
        """How many keys are neither revoked nor expired (an open gateway stops being open while any are)."""
        moment = time.time() if now is None else now

        def count(db: sa.Connection) -> int:
            query = (
                sa.select(sa.func.count())
                .select_from(client_keys)
                .where(
                    client_keys.c.revoked_at.is_(None),
                    sa.or_(client_keys.c.expires_at.is_(None), client_keys.c.expires_at > moment),
                )
            )
            return int(db.execute(query).scalar_one())

        return await self.database.read(count)

    async def update(self, id_or_label: str, changes: dict[str, Any]) -> KeyRecord:
        """Change a key's label or limits (`changes`: field → new value, None to lift a limit).

        The key is read inside the writing transaction, after its row is locked: two changes made at
        once (two operators, two replicas) both take effect, neither undoes the other's.
        """
        unknown = set(changes) - {*LIMIT_FIELDS, "label"}
        if unknown:
            raise KeyProblem(sorted(unknown)[0], "is not a field of a key")
        new_label = check_label(changes["label"]) if "label" in changes else None
        now = time.time()

        def change(db: sa.Connection) -> KeyRecord:
            record = _find(db, id_or_label)
            # Its row lock first (PostgreSQL and MySQL read committed rows without one), then read it again.
            db.execute(sa.update(client_keys).where(client_keys.c.id == record.id).values(updated_at=now))
            record = _find(db, record.id)
            label = record.label if new_label is None else new_label
            merged = dataclasses.replace(record.limits, **{k: v for k, v in changes.items() if k != "label"})
            limits = checked_limits(merged)
            statement = (
                sa.update(client_keys)
                .where(client_keys.c.id == record.id)
                .values(label=label, updated_at=now, **_limit_values(limits))
            )
            if label == record.label:
                db.execute(statement)
            else:
                _check_label_free(db, label)
                _write_label(db, label, statement)
            return dataclasses.replace(record, label=label, limits=limits, updated_at=now)

        return await self.database.write(change)

    async def revoke(self, id_or_label: str) -> KeyRecord:
        record = await self.find(id_or_label)
        if record.revoked_at is not None:
            return record
        now = time.time()

        def revoke(db: sa.Connection) -> None:
            db.execute(
                sa.update(client_keys).where(client_keys.c.id == record.id).values(revoked_at=now, updated_at=now)
            )
            db.execute(sa.delete(key_leases).where(key_leases.c.key_id == record.id))
            db.execute(sa.delete(key_windows).where(key_windows.c.key_id == record.id))

        await self.database.write(revoke)
        return dataclasses.replace(record, revoked_at=now, updated_at=now)


def models_text(models: Sequence[str] | None) -> str:
    return ", ".join(models) if models else "every model"
