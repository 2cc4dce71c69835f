"""Requests in flight per account, capped: Amazon Q tolerates a handful of concurrent requests per
account (peers report 5–8), and a pile-up beyond that ends in throttling of every account.

A slot is taken when an account is chosen for a call and given back when the reply ends (or the
call fails). A request that finds every eligible account full waits briefly for a slot
(`wait_for_release`); q2api.amazonq.account_choice then answers it "overloaded" with a `retry-after`.
Per process: each worker of a multi-worker gateway keeps its own count.
"""

from __future__ import annotations

import asyncio
import collections


class InflightSlots:
    def __init__(self, cap: int) -> None:
        if cap < 1:
            raise ValueError("an account needs at least one slot")
        self.cap = cap
        self._counts: collections.Counter[str] = collections.Counter()
        self._released = asyncio.Event()  # set at each release; waiters clear it and wait again

    def count(self, account_id: str) -> int:
        return self._counts[account_id]

    def full(self) -> set[str]:
        return {account_id for account_id, count in self._counts.items() if count >= self.cap}

    def busier_than(self, level: int) -> set[str]:
        """Accounts with more than `level` requests in flight."""
        return {account_id for account_id, count in self._counts.items() if count > level}

    def levels(self) -> list[int]:
        """The in-flight counts below the cap, least busy first (0 always: an idle account may exist)."""
        return sorted({0, *(count for count in self._counts.values() if count < self.cap)})

    def take(self, account_id: str) -> None:
        self._counts[account_id] += 1

    def release(self, account_id: str) -> None:
        remaining = self._counts[account_id] - 1
        if remaining > 0:
            self._counts[account_id] = remaining
        else:
            del self._counts[account_id]
        self._released.set()

    async def wait_for_release(self, timeout: float) -> bool:
        """Wait until some slot is given back (True) or `timeout` passes (False)."""
        self._released.clear()
        try:
            async with asyncio.timeout(timeout):
                await self._released.wait()
        except TimeoutError:
            return False
        return True
