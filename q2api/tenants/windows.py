"""The windows a key's limits are counted in: fixed windows (this minute, this UTC day, this UTC month).

Fixed windows rather than sliding ones: one counter per window is one Redis key or one row, and a
client told `retry-after` knows exactly when its window opens again. A burst across a boundary can
reach twice a per-minute limit within a minute; for budgets (days, months) that does not arise.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence

from q2api.tenants.keys import KeyLimits

REQUESTS = "requests"
TOKENS = "tokens"
CREDITS_DAY = "credits_day"
CREDITS_MONTH = "credits_month"
LIMIT_NAMES = {REQUESTS: "rpm", TOKENS: "tpm", CREDITS_DAY: "credits_per_day", CREDITS_MONTH: "credits_per_month"}


@dataclasses.dataclass(frozen=True, slots=True)
class Window:
    name: str  # what it counts: REQUESTS, TOKENS, CREDITS_DAY, CREDITS_MONTH
    start: float  # epoch seconds
    end: float
    limit: float
    cost: float  # what admitting this request adds now (0 for a budget: credits are known only after)

    def refuses(self, used: float) -> bool:
        """Whether a request is refused with `used` already counted: a rate admits up to its limit
        exactly; a budget admits while anything is left of it."""
        if self.cost > 0:
            return used + self.cost > self.limit
        return used >= self.limit


def minute(now: float) -> tuple[float, float]:
    start = float(int(now // 60) * 60)
    return start, start + 60.0


def utc_day(now: float) -> tuple[float, float]:
    start = float(int(now // 86400) * 86400)
    return start, start + 86400.0


def utc_month(now: float) -> tuple[float, float]:
    moment = datetime.datetime.fromtimestamp(now, tz=datetime.UTC)
    first = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (
        first.replace(year=first.year + 1, month=1) if first.month == 12 else first.replace(month=first.month + 1)
    )
    return first.timestamp(), following.timestamp()


def windows_for(limits: KeyLimits, now: float, input_tokens: int) -> list[Window]:
    """The windows a request is checked against, with what it costs in each."""
    windows: list[Window] = []
    if limits.rpm is not None:
        windows.append(Window(REQUESTS, *minute(now), limit=limits.rpm, cost=1))
    if limits.tpm is not None:
        # The input estimate is counted at admission; the actual usage corrects it afterwards.
        windows.append(Window(TOKENS, *minute(now), limit=limits.tpm, cost=max(input_tokens, 1)))
    if limits.credits_per_day is not None:
        windows.append(Window(CREDITS_DAY, *utc_day(now), limit=limits.credits_per_day, cost=0))
    if limits.credits_per_month is not None:
        windows.append(Window(CREDITS_MONTH, *utc_month(now), limit=limits.credits_per_month, cost=0))
    return windows


def budget_windows(now: float) -> Sequence[tuple[str, float, float]]:
    """The credit windows a request's spend is added to (whether or not the key has a budget: the
    keys panel shows spend against a budget set later)."""
    return ((CREDITS_DAY, *utc_day(now)), (CREDITS_MONTH, *utc_month(now)))
