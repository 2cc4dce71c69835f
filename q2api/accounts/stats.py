"""Per-account request counters, shared by every worker through the store.

Requests are counted in memory (no store write per request) and added to the
store's `q2api_account_stats` rows by each worker every couple of seconds, with
`requests = requests + ?`, so the workers' counts add up instead of
overwriting each other.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from q2api.accounts.records import StatsDelta

_MAX_ERROR_CHARS = 300


class StatsRecorder:
    """This worker's counts since the last flush (used from the event loop only)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._pending: dict[str, StatsDelta] = {}
        self._clock = clock

    def record(self, account_id: str, error: str | None = None) -> None:
        """One call to Amazon Q with `account_id`; `error` says why it failed (never a secret)."""
        delta = self._pending.setdefault(account_id, StatsDelta())
        delta.requests += 1
        delta.last_used_at = self._clock()
        if error is not None:
            delta.failures += 1
            delta.last_error = error[:_MAX_ERROR_CHARS]

    def take(self) -> dict[str, StatsDelta]:
        """Hand the pending counts over for a flush (and start counting afresh)."""
        pending, self._pending = self._pending, {}
        return pending

    def restore(self, pending: dict[str, StatsDelta]) -> None:
        """Put counts whose flush failed back, so the next flush writes them."""
        for account_id, delta in pending.items():
            current = self._pending.setdefault(account_id, StatsDelta())
            current.requests += delta.requests
            current.failures += delta.failures
            current.last_error = current.last_error or delta.last_error
            current.last_used_at = max(current.last_used_at or 0.0, delta.last_used_at or 0.0) or None
