"""Per-account request counters, shared by every worker through the store.

Requests are counted in memory (no store write per request) and added to the
store's `account_stats` rows by each worker every couple of seconds, with
`requests = requests + ?`, so the workers' counts add up instead of
overwriting each other.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from q2api.amazonq.accounts.store import AccountStore

_MAX_ERROR_CHARS = 300


@dataclasses.dataclass(frozen=True)
class AccountStats:
    requests: int = 0  # calls to Amazon Q made with the account (retries included)
    failures: int = 0  # of which failed on the upstream's or the account's side
    last_error: str | None = None
    last_used_at: float | None = None  # epoch seconds


@dataclasses.dataclass
class _Delta:
    requests: int = 0
    failures: int = 0
    last_error: str | None = None
    last_used_at: float | None = None


class StatsRecorder:
    """This worker's counts since the last flush (used from the event loop only)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._pending: dict[str, _Delta] = {}
        self._clock = clock

    def record(self, account_id: str, error: str | None = None) -> None:
        """One call to Amazon Q with `account_id`; `error` says why it failed (never a secret)."""
        delta = self._pending.setdefault(account_id, _Delta())
        delta.requests += 1
        delta.last_used_at = self._clock()
        if error is not None:
            delta.failures += 1
            delta.last_error = error[:_MAX_ERROR_CHARS]

    def take(self) -> dict[str, _Delta]:
        """Hand the pending counts over for a flush (and start counting afresh)."""
        pending, self._pending = self._pending, {}
        return pending

    def restore(self, pending: dict[str, _Delta]) -> None:
        """Put counts whose flush failed back, so the next flush writes them."""
        for account_id, delta in pending.items():
            current = self._pending.setdefault(account_id, _Delta())
            current.requests += delta.requests
            current.failures += delta.failures
            current.last_error = current.last_error or delta.last_error
            current.last_used_at = max(current.last_used_at or 0.0, delta.last_used_at or 0.0) or None


def write_stats(store: AccountStore, pending: dict[str, _Delta]) -> None:
    """Add `pending` to the stored counts in one transaction (blocking: run it in a thread)."""
    if not pending:
        return
    with store.transaction() as db:
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


def read_stats(store: AccountStore) -> dict[str, AccountStats]:
    """Every account's stored counts, by account id (accounts never used have none)."""
    with store.connect() as db:
        rows = db.execute("SELECT * FROM account_stats").fetchall()
    return {
        row["account_id"]: AccountStats(row["requests"], row["failures"], row["last_error"], row["last_used_at"])
        for row in rows
    }
