"""Hosts resting per account: a host that failed an account is left alone for a while, then tried again.

A host that answered an account with an auth- or route-shaped failure (A8.5: 401/403/404, a
connection that could not be opened) rests for that account only — another account (another token
kind, another region) may be served by it. The rest doubles with each failure in a row (back-off) up
to a ceiling, and a success ends it: a host that comes back is used again, first in its order.

Kept in memory per process; with a `FleetRests` (q2api.fleet: Redis, or the store) a rest begun or
ended here is also told to the fleet (sent without waiting), and the rests other workers and replicas
began are learnt from it — at no cost of their own: the fleet hands an account's rests over with each
of its in-flight slots (q2api.amazonq.inflight), so a request's hosts are ordered by what the whole
fleet saw fail, up to the moment its slot was taken. After a restart without a fleet every host gets
one fresh try, which costs one failover.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from q2api.amazonq.hosts import Host

FIRST_REST_SECONDS = 60.0
MAX_REST_SECONDS = 1800.0
_MAX_ENTRIES = 100_000  # accounts × hosts; a bound, not a figure one expects to reach


@dataclasses.dataclass(slots=True)
class _Rest:
    failures: int  # in a row
    until: float


class FleetRests(Protocol):
    """Rests shared by every worker and replica (q2api.fleet.limits); `until` in epoch seconds."""

    def rests_of(self, account_id: str) -> dict[str, tuple[int, float]]:
        """What the fleet last said of `account_id`'s rests: host URL → (failures in a row, until)."""
        ...

    def rest(self, account_id: str, host_url: str, failures: int, until: float) -> None: ...

    def served(self, account_id: str, host_url: str) -> None: ...


class HostRests:
    """Which host each account should try first, given what failed lately."""

    def __init__(
        self,
        *,
        first: float = FIRST_REST_SECONDS,
        ceiling: float = MAX_REST_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        fleet: FleetRests | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._first = first
        self._ceiling = ceiling
        self._clock = clock
        self._wall_clock = wall_clock  # the fleet's rests end at an epoch time: every process reads them alike
        self._fleet = fleet
        self._rests: dict[tuple[str, str], _Rest] = {}

    def _rest_of(self, account_id: str, host_url: str) -> _Rest | None:
        """This process's rest of the host, or the fleet's when it ends later."""
        mine = self._rests.get((account_id, host_url))
        if self._fleet is None:
            return mine
        shared = self._fleet.rests_of(account_id).get(host_url)
        if shared is None:
            return mine
        failures, until = shared
        theirs = _Rest(failures, self._clock() + (until - self._wall_clock()))
        return theirs if mine is None or theirs.until > mine.until else mine

    def order(self, account_id: str, hosts: Sequence[Host]) -> list[Host]:
        """`hosts` in the order to try them: those not resting in their own order, then the resting ones,
        the one whose rest ends first leading (every host stays reachable, none is ever dropped)."""
        now = self._clock()
        awake: list[Host] = []
        resting: list[tuple[float, int, Host]] = []
        for position, host in enumerate(hosts):
            rest = self._rest_of(account_id, host.url)
            if rest is None or rest.until <= now:
                awake.append(host)
            else:
                resting.append((rest.until, position, host))
        return awake + [host for _, _, host in sorted(resting, key=lambda entry: entry[:2])]

    def is_resting(self, account_id: str, host: Host) -> bool:
        rest = self._rest_of(account_id, host.url)
        return rest is not None and rest.until > self._clock()

    def rest(self, account_id: str, host: Host) -> float:
        """`host` failed `account_id`: it rests (longer after each failure in a row); returns the seconds."""
        key = (account_id, host.url)
        previous = self._rest_of(account_id, host.url)
        failures = previous.failures + 1 if previous is not None else 1
        seconds = min(self._ceiling, self._first * 2.0 ** (failures - 1))
        if key not in self._rests and len(self._rests) >= _MAX_ENTRIES:
            self._forget_expired()
        self._rests[key] = _Rest(failures, self._clock() + seconds)
        if self._fleet is not None:
            self._fleet.rest(account_id, host.url, failures, self._wall_clock() + seconds)
        return seconds

    def served(self, account_id: str, host: Host) -> None:
        """`host` served `account_id`: whatever it failed before is forgotten (by the fleet too, which is
        told only when there was a rest to forget: a request served as usual costs no round trip)."""
        mine = self._rests.pop((account_id, host.url), None)
        if self._fleet is not None and (mine is not None or host.url in self._fleet.rests_of(account_id)):
            self._fleet.served(account_id, host.url)

    def _forget_expired(self) -> None:
        now = self._clock()
        for key in [key for key, rest in self._rests.items() if rest.until <= now]:
            del self._rests[key]
