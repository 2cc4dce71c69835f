"""WaitDeadline: per-wait time limits from one lazily re-armed loop timer."""

from __future__ import annotations

import asyncio

import pytest

from q2api.amazonq.wait_deadline import WaitDeadline


async def timed_wait(deadline: WaitDeadline, limit: float, wait: asyncio.Future[None] | float) -> bool:
    """True if the wait ran out of time, False if it ended on its own."""
    loop = asyncio.get_running_loop()
    deadline.begin(loop.time() + limit)
    try:
        if isinstance(wait, float):
            await asyncio.sleep(wait)
        else:
            await wait
        return False
    except asyncio.CancelledError:
        if deadline.expired():
            return True
        raise
    finally:
        deadline.end()


class CountingLoopTimers:
    """Counts `call_at` on the running loop (the timers a deadline arms)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        loop = asyncio.get_running_loop()
        original = loop.call_at
        self.armed = 0

        def call_at(when, callback, *args, **kwargs):
            self.armed += 1
            return original(when, callback, *args, **kwargs)

        monkeypatch.setattr(loop, "call_at", call_at)


async def test_a_wait_longer_than_its_limit_is_ended_and_reads_as_a_timeout() -> None:
    deadline = WaitDeadline()
    started = asyncio.get_running_loop().time()
    assert await timed_wait(deadline, 0.05, 5.0) is True
    assert asyncio.get_running_loop().time() - started < 2.0
    assert asyncio.current_task().cancelling() == 0  # the cancel was taken back


async def test_many_short_waits_arm_one_timer_and_none_of_them_times_out(monkeypatch) -> None:
    timers = CountingLoopTimers(monkeypatch)
    deadline = WaitDeadline()
    for _ in range(200):
        assert await timed_wait(deadline, 5.0, 0.0) is False
    assert timers.armed == 1
    deadline.close()


async def test_the_timer_re_arms_for_the_wait_in_progress() -> None:
    # The first wait arms a timer for 0.1 s; the second begins later, so when the timer
    # fires it must re-arm for the second wait's own deadline instead of ending it early.
    deadline = WaitDeadline()
    assert await timed_wait(deadline, 0.1, 0.0) is False
    await asyncio.sleep(0.06)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await timed_wait(deadline, 0.1, 1.0) is True
    assert loop.time() - started >= 0.09


async def test_a_shorter_deadline_than_the_armed_timer_arms_an_earlier_one() -> None:
    deadline = WaitDeadline()
    assert await timed_wait(deadline, 60.0, 0.0) is False
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await timed_wait(deadline, 0.05, 5.0) is True
    assert loop.time() - started < 2.0


async def test_a_cancel_from_elsewhere_is_not_taken_for_a_timeout() -> None:
    deadline = WaitDeadline()
    waiting = asyncio.ensure_future(timed_wait(deadline, 60.0, 5.0))
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_a_cancel_from_elsewhere_wins_over_a_deadline_that_fired_too() -> None:
    deadline = WaitDeadline()
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(timed_wait(deadline, 0.0, never))
    await asyncio.sleep(0)  # the wait begins; its deadline has passed already
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_a_timer_firing_between_waits_ends_nothing() -> None:
    deadline = WaitDeadline()
    assert await timed_wait(deadline, 0.02, 0.0) is False
    await asyncio.sleep(0.05)  # the timer fires with no wait in progress
    assert await timed_wait(deadline, 5.0, 0.01) is False
