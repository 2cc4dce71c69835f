"""Places in flight held by this process's running requests, renewed while they run.

A place in flight (a client key's, q2api.tenants.gate; an account's slot, q2api.fleet.limits) is a
lease in the counters that expires unless renewed: the process that holds it renews all of its own in
one call per owner every few seconds, so a process that dies (and renews nothing more) frees its
places once their lease runs out, without anybody having to notice that it died.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence

Renew = Callable[[str, Sequence[str]], Awaitable[None]]  # owner (a key id, an account id), its leases


class LeaseRenewal:
    def __init__(self, renew: Renew, on_failure: Callable[[Exception], None], *, max_age: float) -> None:
        """`max_age`: a lease is renewed this long at most, whatever becomes of its request (a request
        whose end was never told, a bug, must not hold its place for ever)."""
        self._renew = renew
        self._on_failure = on_failure
        self._max_age = max_age
        self._held: dict[str, tuple[str, float]] = {}  # lease → (owner, when it was taken, monotonic)
        self._renewing: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, lease: str, owner: str) -> None:
        self._held[lease] = (owner, time.monotonic())

    def drop(self, lease: str) -> None:
        self._held.pop(lease, None)

    def start(self, every: float) -> None:
        """Renew every `every` seconds, until `close`."""
        self._renewing = asyncio.get_running_loop().create_task(self._renew_forever(every), name="lease renewal")

    async def close(self) -> None:
        if self._renewing is not None:
            self._renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewing
            self._renewing = None

    async def renew_all(self) -> None:
        """Renew every lease held (a failure is left to the next round: a place that expires meanwhile
        only lets one more request in)."""
        by_owner: dict[str, list[str]] = collections.defaultdict(list)
        now = time.monotonic()
        for lease, (owner, taken) in list(self._held.items()):
            if now - taken > self._max_age:  # longer than any request runs: let it expire
                del self._held[lease]
                continue
            by_owner[owner].append(lease)
        for owner, leases in by_owner.items():
            try:
                await self._renew(owner, leases)
            except Exception as exc:
                self._on_failure(exc)

    async def _renew_forever(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            await self.renew_all()
