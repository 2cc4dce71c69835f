"""What the log says while a store the client keys need cannot be used: once a minute, not once a request.

A store that is down fails every request that needs it. One WARNING when that starts, one a minute
while it lasts (with how many requests it touched meanwhile), and one INFO line when the store
answers again; `/metrics` counts every request (the gate's observer, the server's metrics).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

from loguru import logger

WARN_EVERY_SECONDS = 60.0


class Outage:
    def __init__(self, what: str, meanwhile: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        """`what` cannot be used: "the client keys' counters"; `meanwhile`: what requests get then."""
        self._what = what
        self._meanwhile = meanwhile
        self._clock = clock
        self._since: float | None = None  # when the outage began (None: the store answers)
        self._warned_at = 0.0
        self._touched: collections.Counter[str] = collections.Counter()  # since the last line

    @property
    def ongoing(self) -> bool:
        return self._since is not None

    def failed(self, error: Exception, touched: str) -> None:
        """A call failed with `error`; `touched`: what it meant for one request ("admitted unchecked")."""
        self._touched[touched] += 1
        now = self._clock()
        if self._since is None:
            self._since = now
        elif now - self._warned_at < WARN_EVERY_SECONDS:
            return
        self._warned_at = now
        logger.warning(
            f"{self._what} cannot be used ({type(error).__name__}: {error}); {self._meanwhile}; "
            f"{self._summary()} since the last line (said again each minute it lasts)"
        )
        self._touched.clear()

    def answered(self) -> None:
        """A call succeeded: an outage, if there was one, is over."""
        if self._since is None:
            return
        lasted = self._clock() - self._since
        logger.info(f"{self._what} answer again after {lasted:.0f}s; {self._summary()} since the last warning")
        self._since = None
        self._touched.clear()

    def _summary(self) -> str:
        return ", ".join(f"{count} request(s) {touched}" for touched, count in self._touched.items()) or "no request"
