"""Token usage of one reply, from the best source available (docs/protocol.md#from-amazon-q-events-to-claude-events).

Input tokens: `metadataEvent.tokenUsage.uncachedInputTokens` when the upstream
reports it, else `contextUsageEvent.contextUsagePercentage` × the model's
context window (less the cached tokens reported beside it: Anthropic's
`input_tokens` excludes them), else the local estimate of the request. Output
tokens: the upstream's `outputTokens` when given, else the running local count
— never 0, like the real API. Cache reads/writes are exactly what the upstream
reports (`cacheReadInputTokens` / `cacheWriteInputTokens`, docs/protocol.md#prompt-caching-and-metering) and
0 when it reports nothing — never an estimate (always present, so clients can
rely on the keys).

Credits: `meteringEvent {"usage": double, "unit": "credit"}` (docs/protocol.md#prompt-caching-and-metering), summed when
a reply holds several (a web-search turn makes more than one upstream call);
`credits` is None while no metering event was seen, so "free" (0.0) and
"not metered" stay apart.

A reply made of several upstream calls (`next_call`) adds up each call's
figures: every call is a separate sampling that Amazon Q bills on its own. A reply
that starts with a server tool, before any upstream call (`before_first_call`), has
no figures to keep when its first call comes.
"""

from __future__ import annotations

import math
from typing import Any

from q2api.anthropic.events import IterationUsage, Usage


class ReplyUsage:
    __slots__ = (
        "_cache_read",
        "_cache_write",
        "_context_percentage",
        "_done",
        "_first_call_pending",
        "_input",
        "_output",
        "context_window",
        "credits",
        "input_estimate",
    )

    def __init__(self, input_estimate: int, context_window: int) -> None:
        self.input_estimate = input_estimate
        self.context_window = context_window
        self._input: int | None = None  # None = not reported by the upstream
        self._output: int | None = None
        self._context_percentage: float | None = None
        self._cache_read = 0
        self._cache_write = 0
        self.credits: float | None = None  # None: no metering event seen
        self._done = _Totals()  # the finished upstream calls of this reply
        self._first_call_pending = False  # no upstream call was read yet (see `before_first_call`)

    def note_metadata(self, payload: dict[str, Any]) -> None:
        usage = payload.get("tokenUsage")
        if type(usage) is not dict:
            return
        uncached = _count(usage.get("uncachedInputTokens"))
        if uncached is not None:
            self._input = uncached
        output = _count(usage.get("outputTokens"))
        if output:
            self._output = output
        cache_read = _count(usage.get("cacheReadInputTokens"))
        if cache_read is not None:
            self._cache_read = cache_read
        cache_write = _count(usage.get("cacheWriteInputTokens"))
        if cache_write is not None:
            self._cache_write = cache_write

    def note_metering(self, payload: dict[str, Any]) -> None:
        amount = payload.get("usage")
        if isinstance(amount, int | float) and not isinstance(amount, bool) and math.isfinite(amount) and amount >= 0:
            self.credits = (self.credits or 0.0) + float(amount)

    def before_first_call(self) -> None:
        """The reply starts with a server tool's result: no upstream call has been read yet."""
        self._first_call_pending = True

    def next_call(self, input_estimate: int) -> None:
        """The reply goes on with another upstream call (a server tool's result): keep what this
        call reported, start afresh for the next one, whose request is estimated at `input_estimate`."""
        if self._first_call_pending:
            self._first_call_pending = False
            self.input_estimate = input_estimate  # the first upstream call of the reply
            return
        self._done = self._done.plus(self.input_tokens, self._output or 0, self._cache_read, self._cache_write)
        self.input_estimate = input_estimate
        self._input = None
        self._output = None
        self._context_percentage = None
        self._cache_read = 0
        self._cache_write = 0

    def note_context_usage(self, payload: dict[str, Any]) -> None:
        percentage = payload.get("contextUsagePercentage")
        # Anything but a finite share of the window is noise (and 1e308 would overflow the arithmetic).
        if isinstance(percentage, int | float) and math.isfinite(percentage) and 0 <= percentage <= 100:
            self._context_percentage = float(percentage)

    @property
    def context_full(self) -> bool:
        """Amazon Q said this call used the model's whole context window (`contextUsagePercentage` 100)."""
        return self._context_percentage is not None and self._context_percentage >= 100

    def add_credits(self, credits: float | None) -> None:
        """Credits of a call made for this reply by another translator (a compaction's summary)."""
        if credits is not None:
            self.credits = (self.credits or 0.0) + credits

    @property
    def input_tokens(self) -> int:
        """This upstream call's input tokens, cached ones excluded."""
        if self._input is not None:
            return self._input
        if self._context_percentage is not None:
            context = round(self._context_percentage * self.context_window / 100)
            return max(context - self._cache_read - self._cache_write, 0)
        return self.input_estimate

    def snapshot(self, counted_output: int) -> Usage:
        """`counted_output`: the local count of every output token of the reply so far."""
        done = self._done
        output = done.output + self._output if self._output else max(1, counted_output)
        return {
            "input_tokens": done.input + self.input_tokens,
            "output_tokens": output,
            "cache_creation_input_tokens": done.cache_write + self._cache_write,
            "cache_read_input_tokens": done.cache_read + self._cache_read,
        }

    def initial(self) -> Usage:
        """The usage of `message_start`: the estimate, one output token so far."""
        return {
            "input_tokens": self.input_estimate,
            "output_tokens": 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }


def with_this_message(iterations: list[IterationUsage], usage: Usage) -> list[IterationUsage]:
    """`usage.iterations` of a reply that began with a compaction: the summary's call(s), then this message."""
    return [
        *iterations,
        {
            "type": "message",
            "input_tokens": usage["input_tokens"],
            "output_tokens": usage["output_tokens"],
            "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
            "cache_read_input_tokens": usage["cache_read_input_tokens"],
        },
    ]


def _count(value: object) -> int | None:
    if type(value) is int and value >= 0:
        return value
    if type(value) is float and value >= 0:
        return int(value)
    return None


class _Totals:
    """The summed figures of the upstream calls a reply has finished."""

    __slots__ = ("cache_read", "cache_write", "input", "output")

    def __init__(self, input: int = 0, output: int = 0, cache_read: int = 0, cache_write: int = 0) -> None:
        self.input = input
        self.output = output
        self.cache_read = cache_read
        self.cache_write = cache_write

    def plus(self, input: int, output: int, cache_read: int, cache_write: int) -> _Totals:
        return _Totals(
            self.input + input, self.output + output, self.cache_read + cache_read, self.cache_write + cache_write
        )
