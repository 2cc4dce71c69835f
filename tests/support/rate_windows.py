"""Rate limits count in the wall clock's minutes: a test of "N a minute" needs its requests in one.

    refused = await in_one_minute(lambda attempt: burst(f"key-{attempt}"))

Waiting for the next minute to begin cost up to 21 s a test. Instead the burst runs at once, and in
the rare case a minute ended while it ran (its requests counted in two windows; its assertions may
have failed for that alone), it runs again, with a fresh key (`attempt` tells them apart): the second
run begins just after a minute's end, with a whole minute before it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
ATTEMPTS = 3  # a burst that two minute ends in a row cut took over a minute: then something hangs


def minute_of(moment: float) -> int:
    return int(moment // 60)


async def in_one_minute(burst: Callable[[int], Awaitable[T]]) -> T:
    """`burst(attempt)`'s result, from a run that began and ended in one minute of the wall clock."""
    for attempt in range(ATTEMPTS):
        began = minute_of(time.time())
        try:
            result = await burst(attempt)
        except AssertionError:
            if minute_of(time.time()) == began:
                raise  # a failure within one minute is the test's
            continue
        if minute_of(time.time()) == began:
            return result
    raise AssertionError(f"{ATTEMPTS} runs in a row each crossed the end of a minute")
