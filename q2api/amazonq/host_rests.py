"""Hosts resting per account: a host that failed an account is left alone for a while, then tried again.

A host that answered an account with an auth- or route-shaped failure (A8.5: 401/403/404, a
connection that could not be opened) rests for that account only — another account (another token
kind, another region) may be served by it. The rest doubles with each failure in a row (back-off) up
to a ceiling, and a success ends it: a host that comes back is used again, first in its order.

In memory, per process: after a restart every host gets one fresh try, which costs one failover.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

from q2api.amazonq.hosts import Host

FIRST_REST_SECONDS = 60.0
MAX_REST_SECONDS = 1800.0
_MAX_ENTRIES = 100_000  # accounts × hosts; a bound, not a figure one expects to reach


@dataclasses.dataclass(slots=True)
class _Rest:
    failures: int  # in a row
    until: float


class HostRests:
    """Which host each account should try first, given what failed lately."""

    def __init__(
        self,
        *,
        first: float = FIRST_REST_SECONDS,
        ceiling: float = MAX_REST_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._first = first
        self._ceiling = ceiling
        self._clock = clock
        self._rests: dict[tuple[str, str], _Rest] = {}

    def order(self, account_id: str, hosts: Sequence[Host]) -> list[Host]:
        """`hosts` in the order to try them: those not resting in their own order, then the resting ones,
        the one whose rest ends first leading (every host stays reachable, none is ever dropped)."""
        now = self._clock()
        awake: list[Host] = []
        resting: list[tuple[float, int, Host]] = []
        for position, host in enumerate(hosts):
            rest = self._rests.get((account_id, host.url))
            if rest is None or rest.until <= now:
                awake.append(host)
            else:
                resting.append((rest.until, position, host))
        return awake + [host for _, _, host in sorted(resting, key=lambda entry: entry[:2])]

    def is_resting(self, account_id: str, host: Host) -> bool:
        rest = self._rests.get((account_id, host.url))
        return rest is not None and rest.until > self._clock()

    def rest(self, account_id: str, host: Host) -> float:
        """`host` failed `account_id`: it rests (longer after each failure in a row); returns the seconds."""
        key = (account_id, host.url)
        previous = self._rests.get(key)
        failures = previous.failures + 1 if previous is not None else 1
        seconds = min(self._ceiling, self._first * 2.0 ** (failures - 1))
        if previous is None and len(self._rests) >= _MAX_ENTRIES:
            self._forget_expired()
        self._rests[key] = _Rest(failures, self._clock() + seconds)
        return seconds

    def served(self, account_id: str, host: Host) -> None:
        """`host` served `account_id`: whatever it failed before is forgotten."""
        self._rests.pop((account_id, host.url), None)

    def _forget_expired(self) -> None:
        now = self._clock()
        for key in [key for key, rest in self._rests.items() if rest.until <= now]:
            del self._rests[key]
