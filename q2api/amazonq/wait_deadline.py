"""A time limit on each of many short waits, kept with one loop timer instead of one per wait.

A streamed reply waits for upstream bytes once per chunk, and each wait has a
limit (a ping is due; Amazon Q has been silent too long). `asyncio.timeout()`
arms a loop timer before every wait and cancels it after, and aiohttp's own
`sock_read` limit re-arms one per read: 7.0 and 3.1 µs per wait on uvloop
against this one's 1.0 µs (bench/bench_wait_timers.py, 2026-11-28), and ~15 %
of a paced reply's CPU in the running gateway (BENCHMARKS.md). Waits that end long before
their limit do not need a timer of their own: here a wait only notes its
deadline, and the single armed timer, when it fires, either ends the wait that
has run out or re-arms itself for the deadline of the wait in progress.

Ending a wait cancels the waiting task, exactly as `asyncio.timeout()` does,
and the cancel is taken back (`Task.uncancel`) so that it reads as a timeout
unless somebody else cancelled the task too.
"""

from __future__ import annotations

import asyncio

# uvloop fires timers on a 1 ms clock: a timer may run up to that much before its time.
_TIMER_RESOLUTION = 0.001


class WaitDeadline:
    """`begin(deadline)` (loop time) before a wait, `end()` after it, always (use try/finally).

    `expired()` tells, for the CancelledError a wait raised, whether this
    deadline caused it (then the wait timed out) or somebody else cancelled.
    """

    __slots__ = ("_armed_for", "_cancelling", "_deadline", "_fired", "_handle", "_loop", "_task")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for = 0.0  # loop time the armed handle fires at
        self._task: asyncio.Task[object] | None = None  # the task waiting now, if any
        self._deadline = 0.0
        self._cancelling = 0
        self._fired = False

    def begin(self, deadline: float) -> None:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None, "a wait deadline belongs to a task"
        self._task = task
        self._cancelling = task.cancelling()
        self._fired = False
        self._deadline = deadline
        handle = self._handle
        if handle is None or self._armed_for > deadline:
            if handle is not None:
                handle.cancel()
            self._handle = loop.call_at(deadline, self._on_timer)
            self._armed_for = deadline

    def end(self) -> None:
        self._task = None

    def expired(self) -> bool:
        """Whether the wait just cancelled timed out (else: a cancel from elsewhere, to propagate)."""
        if not self._fired:
            return False
        self._fired = False
        task = asyncio.current_task()
        assert task is not None
        return task.uncancel() <= self._cancelling

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._task = None

    def _on_timer(self) -> None:
        self._handle = None
        task = self._task
        if task is None:
            return  # no wait in progress: the next one arms a timer again
        assert self._loop is not None
        if self._deadline - self._loop.time() > _TIMER_RESOLUTION:
            self._handle = self._loop.call_at(self._deadline, self._on_timer)
            self._armed_for = self._deadline
            return
        self._fired = True
        self._task = None
        task.cancel()
