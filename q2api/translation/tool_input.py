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

`ToolCalls` follows the calls of one reply: a new call without `stop` for the previous one judges
that one as its input stands, an event of a call already judged is only reported, and the verdict
says whose call it is (`JudgedToolUse`): the client's (its tool_use block goes out), a server tool's
(the server runs it), or neither (withheld).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import orjson

from q2api.translation.anomalies import AnomalyKind, StreamFinding
from q2api.translation.server_tools import ServerToolCall, new_call


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
    received_bytes: int = 0  # of the fragments so far, counted as they come (the reply's byte bound)

    def add(self, fragment: Any) -> None:
        if fragment is None or fragment == "":
            return
        if not isinstance(fragment, str):
            # Some Kiro streams send the whole input as a JSON object, not a string.
            fragment = orjson.dumps(fragment).decode()
        self.fragments.append(fragment)
        self.received_bytes += len(fragment.encode("utf-8", "surrogatepass"))

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


def oversized_input_finding(buffer: ToolInputBuffer, byte_limit: int) -> StreamFinding:
    return StreamFinding(
        AnomalyKind.TOOL_INPUT_TRUNCATED,
        f"withheld a tool call whose input passed the reply's bound of {byte_limit} bytes (Q2API_MAX_REPLY_BYTES);"
        " the reply ends with max_tokens",
        {"tool_use_id": buffer.tool_use_id, "tool_name": buffer.name, "received_bytes": buffer.received_bytes},
    )


def missing_stop_finding(buffer: ToolInputBuffer, name: str) -> StreamFinding:
    return StreamFinding(
        AnomalyKind.TOOL_USE_WITHOUT_STOP,
        "a tool call ended without `stop: true`; its input was a complete object, so it was kept",
        {"tool_use_id": buffer.tool_use_id, "tool_name": name},
    )


def late_event_finding(tool_use_id: str) -> StreamFinding:
    return StreamFinding(
        AnomalyKind.LATE_TOOL_USE_EVENT, "ignored an event of a judged call", {"tool_use_id": tool_use_id}
    )


def lost_input_finding(buffer: ToolInputBuffer) -> StreamFinding:
    return StreamFinding(
        AnomalyKind.TOOL_INPUT_LOST, "the stream failed during a tool call", {"tool_use_id": buffer.tool_use_id}
    )


# ---------------------------------------------------------------------- the calls of a reply


@dataclass(frozen=True, slots=True)
class ClientToolUse:
    """A call of one of the client's tools: its tool_use block goes out."""

    tool_use_id: str  # the client's id (the one its request used, when the conversion changed it)
    name: str  # the client's name of the tool
    input_json: str
    finding: StreamFinding | None  # the call came without `stop: true`


@dataclass(frozen=True, slots=True)
class ServerToolUse:
    """A call of a server tool: withheld from the client, run by the server once the upstream call ends."""

    call: ServerToolCall
    input_json: str


@dataclass(frozen=True, slots=True)
class WithheldToolUse:
    """A call whose input was cut off or is not an object: withheld, and the reply ends with max_tokens."""

    finding: StreamFinding


JudgedToolUse = ClientToolUse | ServerToolUse | WithheldToolUse


class ToolCalls:
    """The tool calls of one reply: at most one buffered (`pending`), each judged once, whose call it is.

    `tool_names` and `tool_use_ids` give the client back the names and ids its request used where the
    conversion changed them; `server_tools` maps an Amazon Q tool name to the server tool it stands
    for (q2api.translation.server_tools).
    """

    __slots__ = ("_judged_ids", "_server_tools", "_tool_names", "_tool_use_ids", "pending")

    def __init__(
        self, tool_names: Mapping[str, str], tool_use_ids: Mapping[str, str], server_tools: Mapping[str, str]
    ) -> None:
        self._tool_names = tool_names
        self._tool_use_ids = tool_use_ids
        self._server_tools = server_tools
        self._judged_ids: set[str] = set()
        self.pending: ToolInputBuffer | None = None

    def judged(self, tool_use_id: str) -> bool:
        return tool_use_id in self._judged_ids

    def begin(self, tool_use_id: str, name: str) -> ToolInputBuffer:
        pending = self.pending = ToolInputBuffer(tool_use_id, name)
        return pending

    def judge(self, *, stream_ended: bool = False) -> JudgedToolUse:
        """Judge the pending call (`stream_ended`: the upstream body ended before its `stop`)."""
        pending = self.pending
        assert pending is not None
        self.pending = None
        self._judged_ids.add(pending.tool_use_id)
        verdict, input_json = pending.judge()
        if stream_ended and not pending.stopped and verdict is ToolInputVerdict.EMPTY:
            # Cut before any input arrived: "no input" cannot be told from "input lost".
            verdict = ToolInputVerdict.TRUNCATED
        name = self._tool_names.get(pending.name, pending.name)
        if verdict is not ToolInputVerdict.COMPLETE and verdict is not ToolInputVerdict.EMPTY:
            return WithheldToolUse(truncation_finding(pending, name, verdict))
        server_tool = self._server_tools.get(pending.name)
        if server_tool is not None:
            tool_input = orjson.loads(input_json)
            tool_input = tool_input if type(tool_input) is dict else {}
            return ServerToolUse(new_call(server_tool, tool_input, pending.tool_use_id or None), input_json)
        tool_use_id = self._tool_use_ids.get(pending.tool_use_id, pending.tool_use_id)
        tool_use_id = tool_use_id or f"toolu_{uuid.uuid4().hex[:24]}"
        finding = None if pending.stopped else missing_stop_finding(pending, name)
        return ClientToolUse(tool_use_id, name, input_json, finding)
