"""Buffering and judging a tool call's streamed input.

Amazon Q streams `toolUseEvent.input` as string fragments cut anywhere
(docs/protocol.md#tool-use-events). The Anthropic SDK parses the concatenated
`input_json_delta`s after *every* delta and raises on an invalid prefix
(docs/protocol.md#how-the-sdk-reacts-to-a-bad-stream), and a tool call cut off upstream must not look complete.

Strategy: buffer the whole input and judge it once — at `stop: true`, when a
different tool call starts, or at the end of the stream. Only a verdict of
COMPLETE or EMPTY lets the tool_use block be emitted, as start, one
`input_json_delta` carrying the validated JSON text verbatim, and stop. So the
client never sees a delta that is not part of a valid JSON object, and a
broken call is withheld entirely instead of degraded to `{}`. The cost is
latency: the client sees the call only once its input is whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import orjson

from q2api.translation.anomalies import AnomalyKind, StreamFinding


class ToolInputVerdict(Enum):
    COMPLETE = "complete"  # a JSON object
    EMPTY = "empty"  # no input at all: the tool takes none, input is {}
    TRUNCATED = "truncated"  # not valid JSON: cut off upstream
    NOT_AN_OBJECT = "not_an_object"  # valid JSON, but Claude tool input must be an object


EMPTY_INPUT_JSON = "{}"


@dataclass(slots=True)
class ToolInputBuffer:
    tool_use_id: str
    name: str
    fragments: list[str] = field(default_factory=list)
    stopped: bool = False  # upstream sent `stop: true`

    def add(self, fragment: Any) -> None:
        if fragment is None or fragment == "":
            return
        if isinstance(fragment, str):
            self.fragments.append(fragment)
        else:
            # Some Kiro streams send the whole input as a JSON object, not a string.
            self.fragments.append(orjson.dumps(fragment).decode())

    @property
    def received_chars(self) -> int:
        return sum(map(len, self.fragments))

    def judge(self) -> tuple[ToolInputVerdict, str]:
        """The verdict and, for COMPLETE/EMPTY, the JSON text to send."""
        text = "".join(self.fragments).strip()
        if not text:
            return ToolInputVerdict.EMPTY, EMPTY_INPUT_JSON
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return ToolInputVerdict.TRUNCATED, text
        if not isinstance(value, dict):
            return ToolInputVerdict.NOT_AN_OBJECT, text
        # Sent verbatim (already valid): keeps key order, big integers and escapes as the model wrote them.
        return ToolInputVerdict.COMPLETE, text


def truncation_finding(buffer: ToolInputBuffer, name: str, verdict: ToolInputVerdict) -> StreamFinding:
    # The input itself is not recorded: it may hold file contents or credentials.
    return StreamFinding(
        AnomalyKind.TOOL_INPUT_TRUNCATED,
        "withheld a tool call whose input was cut off or invalid; the reply ends with max_tokens",
        {
            "tool_use_id": buffer.tool_use_id,
            "tool_name": name,
            "verdict": verdict.value,
            "stop_received": buffer.stopped,
            "received_chars": buffer.received_chars,
        },
    )


def missing_stop_finding(buffer: ToolInputBuffer, name: str) -> StreamFinding:
    return StreamFinding(
        AnomalyKind.TOOL_USE_WITHOUT_STOP,
        "a tool call ended without `stop: true`; its input was a complete object, so it was kept",
        {"tool_use_id": buffer.tool_use_id, "tool_name": name},
    )
