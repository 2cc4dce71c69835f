"""The simulator's closing frames: token usage with cache figures, credits, context use (docs/protocol.md#prompt-caching-and-metering).

Facts it follows: `cachePoint: {"type": "default"}` marks user and assistant messages and stands
between the tools; cache figures come back in `metadataEvent.tokenUsage` as
`cacheReadInputTokens` / `cacheWriteInputTokens` beside `uncachedInputTokens`; a reply ends with
`meteringEvent {"unit": "credit", "unitPlural": "credits", "usage": <double>}` and
`contextUsageEvent {"contextUsagePercentage": <float>}`, after the content.

Its own choices (not facts; no source shows how Kiro counts):

* the prompt is read in this order: the current message's tools, the history, the current
  message; a segment's tokens are its JSON length / 4, rounded up;
* each cache point caches the prompt up to and including the segment it marks, per account and
  model, for the simulator's lifetime (no minimum size, no expiry). A request reads the longest
  cached prefix among its points (`cacheReadInputTokens`) and writes its longest new one
  (`cacheWriteInputTokens`: that prefix less what was read); without cache points both figures are
  absent;
* credits = 0.01 + (uncached input + 1.25 × cache writes + 0.1 × cache reads + 5 × output) /
  100,000, rounded to 0.0001 — cache reads are cheap, as a real cache would make them;
* the order at the end is metadataEvent, meteringEvent, contextUsageEvent (their real order is
  not documented; `closing_order`, from q2api.testing.assumptions); the context share counts input and output (as peers read it) against 200,000 tokens.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from q2api.amazonq.eventstream import EventStreamDecoder
from q2api.testing import assumptions, scripts
from q2api.testing.assumptions import SIMULATOR
from q2api.testing.scripts import Send, Step

CONTEXT_WINDOW = 200_000


def _tokens(value: object) -> int:
    return -(-len(orjson.dumps(value)) // 4)


class SimulatedAccounting:
    def __init__(self) -> None:
        self._cached: set[str] = set()  # prefix digests
        self.reads = 0  # requests that read from the cache
        self.writes = 0
        # What q2api.testing.assumptions says of the closing frames: their order, the metering unit, and
        # whether the cache figures are reported at all.
        self.closing_order: tuple[str, ...] = SIMULATOR.names(assumptions.STREAM_CLOSING_EVENTS)
        self.metering_unit = SIMULATOR.text(assumptions.STREAM_METERING_UNIT)
        self.reports_cache = SIMULATOR.flag(assumptions.CACHE_FIGURES_REPORTED)

    def closing_frames(self, body: Any, account: str, steps: tuple[Step, ...]) -> list[Send]:
        """The frames that end a reply to `body`, whose own frames are `steps`."""
        usage = self._usage(body, account)
        output = _output_tokens(steps)
        usage["outputTokens"] = output
        usage["totalTokens"] = (
            usage["uncachedInputTokens"]
            + output
            + usage.get("cacheReadInputTokens", 0)
            + usage.get("cacheWriteInputTokens", 0)
        )
        credits = (
            0.01
            + (
                usage["uncachedInputTokens"]
                + 1.25 * usage.get("cacheWriteInputTokens", 0)
                + 0.1 * usage.get("cacheReadInputTokens", 0)
                + 5 * output
            )
            / 100_000
        )
        context = usage["totalTokens"] / CONTEXT_WINDOW * 100
        if not self.reports_cache:
            usage.pop("cacheReadInputTokens", None)
            usage.pop("cacheWriteInputTokens", None)
        unit = self.metering_unit
        frames: dict[str, dict[str, object]] = {
            "metadataEvent": {"tokenUsage": usage},
            "meteringEvent": {"unit": unit, "unitPlural": f"{unit}s", "usage": round(credits, 4)},
            "contextUsageEvent": {"contextUsagePercentage": round(min(context, 100.0), 4)},
        }
        return [scripts.event(kind, frames[kind]) for kind in self.closing_order if kind in frames]

    def _usage(self, body: Any, account: str) -> dict[str, int]:
        segments, points, model = _segments(body)
        total = sum(tokens for _, tokens in segments)
        prefixes = []  # (digest, tokens) of each cache point's prefix
        digest = hashlib.sha256(f"{account}\n{model}".encode())
        running = 0
        for index, (encoded, tokens) in enumerate(segments):
            digest.update(encoded)
            running += tokens
            if index in points:
                prefixes.append((digest.copy().hexdigest(), running))
        read = max((tokens for key, tokens in prefixes if key in self._cached), default=0)
        newest = max((tokens for key, tokens in prefixes if key not in self._cached), default=0)
        written = max(newest - read, 0)
        self._cached.update(key for key, _ in prefixes)
        usage = {"uncachedInputTokens": total - read - written}
        if read:
            usage["cacheReadInputTokens"] = read
            self.reads += 1
        if written:
            usage["cacheWriteInputTokens"] = written
            self.writes += 1
        return usage


def _segments(body: Any) -> tuple[list[tuple[bytes, int]], set[int], str]:
    """The prompt's segments (encoded, tokens), the indices of those a cache point marks, and the model."""
    state = body.get("conversationState") if isinstance(body, dict) else None
    if not isinstance(state, dict):
        return [], set(), ""
    current = (state.get("currentMessage") or {}).get("userInputMessage") or {}
    context = current.get("userInputMessageContext") or {}
    segments: list[tuple[bytes, int]] = []
    points: set[int] = set()
    for tool in context.get("tools") or ():
        if isinstance(tool, dict) and "cachePoint" in tool:
            if segments:
                points.add(len(segments) - 1)
            continue
        segments.append((orjson.dumps(tool), _tokens(tool)))
    for message in [*(state.get("history") or ()), {"userInputMessage": current}]:
        inner: Any = next(iter(message.values()), {}) if isinstance(message, dict) else {}
        if not isinstance(inner, dict):
            continue
        plain = {key: value for key, value in inner.items() if key not in ("cachePoint", "modelId")}
        if plain.get("userInputMessageContext"):
            plain["userInputMessageContext"] = {
                key: value for key, value in plain["userInputMessageContext"].items() if key != "tools"
            }
        segments.append((orjson.dumps(plain), _tokens(plain)))
        if "cachePoint" in inner:
            points.add(len(segments) - 1)
    return segments, points, str(current.get("modelId", ""))


def _output_tokens(steps: tuple[Step, ...]) -> int:
    """Output tokens of a reply: its text, reasoning and tool input, / 4."""
    decoder = EventStreamDecoder()
    chars = 0
    for step in steps:
        if not isinstance(step, Send):
            continue
        try:
            frames = decoder.feed(step.data)
        except Exception:  # a deliberately broken frame of a fault script
            return max(chars // 4, 1)
        for frame in frames:
            try:
                payload = orjson.loads(frame.payload) if frame.payload else {}
            except orjson.JSONDecodeError:
                continue
            if isinstance(payload, dict):
                for key in ("content", "text", "input"):
                    if isinstance(payload.get(key), str):
                        chars += len(payload[key])
    return max(-(-chars // 4), 1)
