"""Stored Responses API conversations in the account store's SQLite file (implements `ResponseStore`).

The `responses` table is created with the account tables (schema.py), so the file's one-process-
at-a-time set-up covers it. Like the account store, every call opens its own connection in a
worker thread (`in_thread`): a busy timeout may hold a call for seconds, which the event loop must
not feel.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from q2api.accounts.response_store import PurgeClock, StoredResponse, stored_response
from q2api.accounts.store import in_thread

_BUSY_TIMEOUT = 10.0


class SqliteResponseStore:
    def __init__(self, path: Path, *, busy_timeout: float = _BUSY_TIMEOUT) -> None:
        """`path`: the account store's SQLite file, whose schema already has the table."""
        self.path = path
        self._busy_timeout = busy_timeout
        self._purge = PurgeClock()

    @in_thread
    def save(self, response: StoredResponse) -> None:
        purge = self._purge.due()
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    """
                    INSERT INTO responses (id, owner, previous_response_id, created_at, expires_at, model, record)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                    (
                        response.id,
                        response.owner,
                        response.previous_response_id,
                        response.created_at,
                        response.expires_at,
                        response.model,
                        response.record(),
                    ),
                )
                if purge:
                    db.execute("DELETE FROM responses WHERE expires_at <= ?", (time.time(),))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @in_thread
    def get(self, response_id: str, owner: str) -> StoredResponse | None:
        with self._connect() as db:
            row = db.execute(
                "SELECT * FROM responses WHERE id = ? AND owner = ? AND expires_at > ?",
                (response_id, owner, time.time()),
            ).fetchone()
        if row is None:
            return None
        return stored_response(
            response_id=row["id"],
            owner=row["owner"],
            previous_response_id=row["previous_response_id"],
            created_at=row["created_at"],
            expires_at=row["expires_at"],
            model=row["model"],
            record=row["record"],
        )

    @in_thread
    def delete(self, response_id: str, owner: str) -> bool:
        with self._connect() as db:
            cursor = db.execute("DELETE FROM responses WHERE id = ? AND owner = ?", (response_id, owner))
        return cursor.rowcount > 0

    @in_thread
    def purge_expired(self) -> int:
        with self._connect() as db:
            cursor = db.execute("DELETE FROM responses WHERE expires_at <= ?", (time.time(),))
        return cursor.rowcount

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None)
        try:
            db.row_factory = sqlite3.Row
            yield db
        finally:
            db.close()
