"""Token usage of one reply, from the best source available (docs/protocol.md#from-amazon-q-events-to-claude-events).

Input tokens: `metadataEvent.tokenUsage.uncachedInputTokens` when the upstream
reports it, else `contextUsageEvent.contextUsagePercentage` × the model's
context window, else the local estimate of the request. Output tokens: the
upstream's `outputTokens` when given, else the running local count — never 0,
like the real API. Cache reads/writes are reported when the upstream gives
them and are 0 otherwise (always present, so clients can rely on the keys).
"""

from __future__ import annotations

import math
from typing import Any

from q2api.anthropic.events import Usage


class ReplyUsage:
    __slots__ = (
        "_cache_read",
        "_cache_write",
        "_context_percentage",
        "_input",
        "_output",
        "context_window",
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

    def note_context_usage(self, payload: dict[str, Any]) -> None:
        percentage = payload.get("contextUsagePercentage")
        # Anything but a finite share of the window is noise (and 1e308 would overflow the arithmetic).
        if isinstance(percentage, int | float) and math.isfinite(percentage) and 0 <= percentage <= 100:
            self._context_percentage = float(percentage)

    @property
    def input_tokens(self) -> int:
        if self._input is not None:
            return self._input
        if self._context_percentage is not None:
            return round(self._context_percentage * self.context_window / 100)
        return self.input_estimate

    def snapshot(self, counted_output: int) -> Usage:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self._output or max(1, counted_output),
            "cache_creation_input_tokens": self._cache_write,
            "cache_read_input_tokens": self._cache_read,
        }

    def initial(self) -> Usage:
        """The usage of `message_start`: the estimate, one output token so far."""
        return {
            "input_tokens": self.input_estimate,
            "output_tokens": 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }


def _count(value: object) -> int | None:
    if type(value) is int and value >= 0:
        return value
    if type(value) is float and value >= 0:
        return int(value)
    return None
