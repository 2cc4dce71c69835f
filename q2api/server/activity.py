"""The last requests this worker served, in an in-memory ring (the admin API's `GET /admin/api/activity`).

Each entry is the request's log record (`Exchange`) reduced to what an operator
watches: when, which model, which account, the status, the time to first token,
the duration, the tokens and the credits Amazon Q metered (null when it metered none). Nothing about the request's contents is kept.
The ring is per worker and starts empty at every start: it is a window on
recent traffic, not a history (the log line is the history).
"""

from __future__ import annotations

import collections
import datetime
import time
from collections.abc import Callable
from typing import Any

from q2api.server.lifecycle.exchange_log import Exchange

ACTIVITY_SIZE = 200  # requests kept; also the largest `limit` a client may ask for
DEFAULT_LIMIT = 50


class ActivityLog:
    """The last ACTIVITY_SIZE requests, newest last (used from the event loop only)."""

    def __init__(self, size: int = ACTIVITY_SIZE, clock: Callable[[], float] = time.time) -> None:
        self._entries: collections.deque[dict[str, Any]] = collections.deque(maxlen=size)
        self._clock = clock

    def record(self, exchange: Exchange) -> None:
        """Keep one finished request; called by the exchange when its log line is written."""
        duration = time.perf_counter() - exchange.started
        self._entries.append(
            {
                "time": _iso_milliseconds(self._clock() - duration),
                "request_id": exchange.request_id,
                "route": exchange.route,
                "model": exchange.model,
                "stream": exchange.stream,
                "status": exchange.status,
                "error": exchange.error,
                "stop_reason": exchange.stop_reason,
                "ttft_ms": _milliseconds(exchange.first_content_seconds),
                "duration_ms": _milliseconds(duration),
                "input_tokens": exchange.input_tokens,
                "output_tokens": exchange.output_tokens,
                "account": exchange.account,
                "key": exchange.key_label,  # the store key's label (None: an environment key)
                "capture": exchange.capture,  # the id of its capture file, if one was written
                "credits": exchange.credits if exchange.credits_metered else None,
            }
        )

    def latest(self, limit: int) -> list[dict[str, Any]]:
        """The `limit` newest entries, newest first."""
        entries = list(self._entries)[-limit:] if limit else []
        entries.reverse()
        return entries


def _iso_milliseconds(epoch: float) -> str:
    """When the request arrived, to the millisecond: the console orders the answers of several workers by it."""
    moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _milliseconds(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)
