"""The shape of what Amazon Q answered — event kinds in order, field names, usage figures — and, apart,
the reply's content, which the probe needs for a second turn and never reports.

`StreamReader` takes the frames of one reply (q2api.amazonq.eventstream) and keeps two things:

* `shape` (`StreamShape`, reportable): each event's kind and the names of its fields, runs of one
  kind collapsed into one entry with a count, and the numbers of the usage events
  (`metadataEvent.tokenUsage`, `meteringEvent`, `contextUsageEvent`) — numbers, never text;
* `content` (`ReplyContent`, in memory only): the text, the reasoning and its signature, the tool
  calls, to send back in the next turn.

`document_fields` is the same for a JSON answer (the catalogue, credits, web search): the key paths.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from q2api.amazonq.eventstream import Frame
from q2api.probe.redaction import Redactor

USAGE_EVENTS = ("metadataEvent", "meteringEvent", "contextUsageEvent")
CONTENT_EVENTS = frozenset({"assistantResponseEvent", "reasoningContentEvent", "toolUseEvent", "codeEvent"})
_MAX_DEPTH = 3


@dataclasses.dataclass
class EventRun:
    """One event kind, `count` times in a row, with the union of their field names."""

    kind: str
    count: int
    fields: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "count": self.count, "fields": list(self.fields)}


@dataclasses.dataclass
class StreamShape:
    events: list[EventRun] = dataclasses.field(default_factory=list)
    token_usage: dict[str, float] = dataclasses.field(default_factory=dict)  # the last metadataEvent.tokenUsage
    metering: dict[str, float] = dataclasses.field(default_factory=dict)  # meteringEvent numbers
    metering_unit: str | None = None
    context_usage: dict[str, float] = dataclasses.field(default_factory=dict)
    ended: str = "complete"  # "complete", or the decoder's fault / how the body broke

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(run.kind for run in self.events)

    @property
    def closing_kinds(self) -> tuple[str, ...]:
        """The kinds after the last content event (usage, metering, context), in order."""
        kinds = self.kinds
        last_content = max((index for index, kind in enumerate(kinds) if kind in CONTENT_EVENTS), default=-1)
        return _collapsed(kinds[last_content + 1 :])

    def fields_of(self, kind: str) -> list[tuple[str, ...]]:
        return [run.fields for run in self.events if run.kind == kind]

    def as_dict(self) -> dict[str, Any]:
        return {
            "events": [run.as_dict() for run in self.events],
            "token_usage": self.token_usage or None,
            "metering": {**self.metering, "unit": self.metering_unit} if self.metering or self.metering_unit else None,
            "context_usage": self.context_usage or None,
            "ended": self.ended,
        }


@dataclasses.dataclass
class ToolCall:
    tool_use_id: str
    name: str
    input_text: str = ""
    stopped: bool = False
    input_in_first_event: bool = False


@dataclasses.dataclass
class ReplyContent:
    """What the reply said. Never reported: the next turn needs it, and the run's Redactor learns it."""

    text: str = ""
    reasoning: str = ""
    signature: str = ""
    signature_frames: int = 0
    redacted_reasoning: str = ""
    tool_calls: dict[str, ToolCall] = dataclasses.field(default_factory=dict)


class StreamReader:
    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self.shape = StreamShape()
        self.content = ReplyContent()

    def add(self, frames: Iterable[Frame]) -> None:
        for frame in frames:
            self._add(frame)

    def _add(self, frame: Frame) -> None:
        message_type = frame.message_type
        if message_type == "exception":
            kind = f"exception:{self._redactor.name(frame.exception_type)}"
        elif message_type == "error":
            kind = f"error:{self._redactor.name(frame.error_code)}"
        else:
            kind = self._redactor.name(frame.event_type)
        payload = _payload(frame)
        fields = tuple(sorted(key_paths(payload, self._redactor.name)))
        runs = self.shape.events
        if runs and runs[-1].kind == kind:
            runs[-1].count += 1
            runs[-1].fields = tuple(sorted({*runs[-1].fields, *fields}))
        else:
            runs.append(EventRun(kind, 1, fields))
        if message_type in ("exception", "error"):
            return
        event_type = frame.event_type
        if event_type in USAGE_EVENTS:
            self._usage(str(event_type), payload)
        else:
            self._content(str(event_type), payload)

    def _usage(self, event_type: str, payload: Mapping[str, Any]) -> None:
        if event_type == "metadataEvent":
            usage = payload.get("tokenUsage")
            if isinstance(usage, Mapping):
                self.shape.token_usage = self._numbers(usage)
        elif event_type == "meteringEvent":
            self.shape.metering = self._numbers(payload)
            unit = payload.get("unit")
            self.shape.metering_unit = self._redactor.name(unit) if isinstance(unit, str) else None
        else:
            self.shape.context_usage = self._numbers(payload)

    def _numbers(self, payload: Mapping[str, Any]) -> dict[str, float]:
        return {
            self._redactor.name(key): value
            for key, value in payload.items()
            if isinstance(value, int | float) and not isinstance(value, bool)
        }

    def _content(self, event_type: str, payload: Mapping[str, Any]) -> None:
        content = self.content
        if event_type == "assistantResponseEvent" and isinstance(payload.get("content"), str):
            content.text += payload["content"]
        elif event_type == "reasoningContentEvent":
            if isinstance(payload.get("text"), str):
                content.reasoning += payload["text"]
            if isinstance(payload.get("signature"), str):
                content.signature += payload["signature"]
                content.signature_frames += 1
            if isinstance(payload.get("redactedContent"), str):
                content.redacted_reasoning += payload["redactedContent"]
        elif event_type == "toolUseEvent":
            self._tool_use(payload)

    def _tool_use(self, payload: Mapping[str, Any]) -> None:
        tool_use_id, name = payload.get("toolUseId"), payload.get("name")
        if not isinstance(tool_use_id, str) or not isinstance(name, str):
            return
        call = self.content.tool_calls.get(tool_use_id)
        piece = payload.get("input")
        if call is None:
            call = self.content.tool_calls[tool_use_id] = ToolCall(tool_use_id, name)
            call.input_in_first_event = isinstance(piece, str) and bool(piece)
        if isinstance(piece, str):
            call.input_text += piece
        if payload.get("stop") is True:
            call.stopped = True

    def finish(self, fault: str | None = None) -> None:
        """The body ended (`fault`: how it broke, if it did); the texts read are now known to the Redactor."""
        if fault is not None:
            self.shape.ended = fault
        content = self.content
        for text in (content.text, content.reasoning):
            self._redactor.add_text(text)
        for secret in (content.signature, content.redacted_reasoning):
            self._redactor.add_secret(secret)
        for call in content.tool_calls.values():
            self._redactor.add_text(call.input_text)
            self._redactor.add_secret(call.tool_use_id)


def key_paths(value: object, rename: Callable[[object], str] = str, prefix: str = "", depth: int = 0) -> set[str]:
    """`{"a": {"b": 1}, "c": [{"d": 2}]}` → {"a", "a.b", "c", "c[].d"}: names only, to `_MAX_DEPTH` levels,
    each key passed through `rename` (a Redactor's `name`) before it joins a path."""
    paths: set[str] = set()
    if depth >= _MAX_DEPTH:
        return paths
    if isinstance(value, Mapping):
        for key, inner in value.items():
            path = f"{prefix}{rename(key)}"
            paths.add(path)
            paths |= key_paths(inner, rename, path + ".", depth + 1)
    elif isinstance(value, list):
        for item in value[:20]:
            paths |= key_paths(item, rename, prefix.rstrip(".") + "[].", depth)
    return paths


def document_fields(document: object, redactor: Redactor) -> tuple[str, ...]:
    """A JSON answer's key paths, each key kept only when it is a plain name (q2api.probe.redaction)."""
    return tuple(sorted(key_paths(document, redactor.name)))


def _payload(frame: Frame) -> dict[str, Any]:
    try:
        document = orjson.loads(frame.payload) if frame.payload else {}
    except orjson.JSONDecodeError:
        return {}
    if isinstance(document, dict) and len(document) == 1:
        # Some streams wrap the payload in its event's name (docs/protocol.md#event-types): unwrap it.
        ((key, inner),) = document.items()
        if key == frame.event_type and isinstance(inner, dict):
            return inner
    return document if isinstance(document, dict) else {}


def _collapsed(kinds: Iterable[str]) -> tuple[str, ...]:
    result: list[str] = []
    for kind in kinds:
        if not result or result[-1] != kind:
            result.append(kind)
    return tuple(result)
