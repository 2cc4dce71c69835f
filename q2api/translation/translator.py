"""Amazon Q reply frames → Claude stream events (docs/protocol.md#from-amazon-q-events-to-claude-events,
docs/protocol.md#event-sequence).

`StreamTranslator` is a pure state machine: decoded event-stream frames in,
Anthropic SSE event dicts out, exactly as they go on the wire. With
`ContentBlocks` it owns the streaming grammar (message_start first, 0-based
consecutive block indices, one open block at a time, message_delta +
message_stop at the end, or a closed block + `error` on failure), so the app
only moves bytes.

Phases (`Phase`)::

    NOT_STARTED ──start()/first frame──▶ IDLE ◀──────────────┐
                                          │ text / thinking / │ block closed,
                                          ▼ tool call begins  │ tool judged
                          IN_TEXT | IN_THINKING | IN_TOOL_USE ┘
    any phase ──finish() / stop sequence / max_tokens──▶ DONE
    any phase ──exception frame / bad payload / fail()──▶ FAILED
    finish() with server-tool calls made ──▶ AWAITING_TOOLS ──resume()──▶ IDLE (next upstream call)
                                                            └─end()────▶ DONE

AWAITING_TOOLS: the upstream call ended with calls of a server tool (web search)
that the server runs (q2api.translation.server_tools); the server writes their
blocks (`server_tool_use`, `server_tool_result`), then either resumes the same
message with the next upstream call's frames or ends it (`end`).

IN_TOOL_USE means a tool call's input is being buffered: no Anthropic block is
open for it yet (q2api/translation/tool_input.py says why). The phase is derived from the
lifecycle (`Lifecycle`), the pending tool call and the open block, so the
three can never disagree.

Reply text goes through the `<thinking>` tag splitter, then the stop-sequence
matcher, then the max_tokens budget; all three are chunking-independent,
which is what lets `feed_all` join a read's texts into one delta.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

import orjson

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.events import (
    MessageStopEvent,
    StartedMessage,
    StreamEvent,
    Usage,
    WebSearchResult,
    WebSearchToolResultError,
    error_event,
)
from q2api.translation.anomalies import AnomalyKind, StreamFinding
from q2api.translation.content_blocks import ContentBlocks, OpenBlock
from q2api.translation.error_mapping import bad_payload, in_stream_failure
from q2api.translation.server_tools import ServerToolCall, new_call
from q2api.translation.stop_conditions import OutputTokenCounter, StopSequenceMatcher
from q2api.translation.thinking_split import SegmentKind, ThinkingTagSplitter
from q2api.translation.tool_input import ToolInputBuffer, ToolInputVerdict, missing_stop_finding, truncation_finding
from q2api.translation.usage import ReplyUsage

if TYPE_CHECKING:
    from q2api.amazonq.eventstream import Frame

Event = StreamEvent


class Phase(Enum):
    NOT_STARTED = "not_started"
    IDLE = "idle"  # message started, no block open
    IN_TEXT = "in_text"
    IN_THINKING = "in_thinking"
    IN_TOOL_USE = "in_tool_use"  # buffering a tool call's input; its block is not started yet
    AWAITING_TOOLS = "awaiting_tools"  # server-tool calls to run before the message goes on
    DONE = "done"
    FAILED = "failed"


class Lifecycle(Enum):
    NOT_STARTED = "not_started"
    STREAMING = "streaming"
    AWAITING_TOOLS = "awaiting_tools"
    DONE = "done"
    FAILED = "failed"


_TEXT = SegmentKind.TEXT
_THINKING = SegmentKind.THINKING
_TEXT_OPEN = OpenBlock.TEXT
_STREAMING = Lifecycle.STREAMING
_MESSAGE_STOP: MessageStopEvent = {"type": "message_stop"}
_loads = orjson.loads


class StreamTranslator:
    def __init__(
        self,
        *,
        model: str,
        input_tokens: int = 0,
        tool_names: Mapping[str, str] | None = None,
        tool_use_ids: Mapping[str, str] | None = None,
        stop_sequences: Iterable[str] = (),
        max_tokens: int | None = None,
        context_window: int = 200_000,
        thinking_tags: bool = True,
        message_id: str | None = None,
        server_tools: Mapping[str, str] | None = None,
    ) -> None:
        """`server_tools`: Amazon Q tool name → the server tool it stands for (`web_search`): calls
        of these are withheld from the client and collected in `server_calls`."""
        self.model = model
        self.message_id = message_id or f"msg_{uuid.uuid4().hex[:24]}"
        self.context_window = context_window
        self.lifecycle = Lifecycle.NOT_STARTED
        self.failure: AnthropicError | None = None
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None
        self.findings: list[StreamFinding] = []
        self.ignored_events: dict[str, int] = {}
        self.tools_emitted = 0
        self.tools_withheld = 0

        self._blocks = ContentBlocks()
        self._usage = ReplyUsage(input_tokens, context_window)
        self._tool_names = tool_names or {}
        self._tool_use_ids = tool_use_ids or {}  # ids the conversion changed: the client gets its own back
        self._splitter = ThinkingTagSplitter(enabled=thinking_tags)
        matcher = StopSequenceMatcher(stop_sequences)
        self._stop_matcher = matcher if matcher.sequences else None
        self._counter = OutputTokenCounter(max_tokens)
        self._pending_tool: ToolInputBuffer | None = None
        self._judged_tool_ids: set[str] = set()
        self._thinking_tags = thinking_tags
        self._server_tools = dict(server_tools or {})
        self.server_calls: list[ServerToolCall] = []  # made in the current upstream call
        self.web_search_requests = 0  # searches run for this reply (usage.server_tool_use)
        self._result_titles: dict[str, str] = {}  # url → title of the search results shown, for citations
        # An upstream call was read (its usage counts): false while a first search runs before any call.
        self._usage_seen = True
        self._handlers: dict[object, Callable[[dict[str, Any], list[Event]], None]] = {
            "assistantResponseEvent": self._on_assistant_response,
            "reasoningContentEvent": self._on_reasoning,
            "toolUseEvent": self._on_tool_use,
            "metadataEvent": lambda payload, out: self._usage.note_metadata(payload),
            "contextUsageEvent": lambda payload, out: self._usage.note_context_usage(payload),
            "meteringEvent": lambda payload, out: self._usage.note_metering(payload),
            "invalidStateEvent": self._on_invalid_state,
            "citationEvent": self._on_citation,
        }

    # ------------------------------------------------------------------ status

    @property
    def phase(self) -> Phase:
        lifecycle = self.lifecycle
        if lifecycle is not _STREAMING:
            return Phase[lifecycle.name]
        if self._pending_tool is not None:
            return Phase.IN_TOOL_USE
        open_block = self._blocks.open
        if open_block is OpenBlock.TEXT:
            return Phase.IN_TEXT
        return Phase.IN_THINKING if open_block is OpenBlock.THINKING else Phase.IDLE

    @property
    def has_content(self) -> bool:
        """A content block was produced: the reply is committed, an HTTP error is no longer possible."""
        return self._blocks.count > 0

    @property
    def finished(self) -> bool:
        """No more events will come: stop reading the upstream."""
        return self.lifecycle is Lifecycle.DONE or self.lifecycle is Lifecycle.FAILED

    @property
    def credits(self) -> float | None:
        """The credits Amazon Q metered for this reply (docs/protocol.md#prompt-caching-and-metering); None when it sent no metering event."""
        return self._usage.credits

    @property
    def usage(self) -> Usage:
        """Cumulative usage so far (the final one once finished)."""
        usage = self._usage.snapshot(self._counter.total)
        if self._server_tools:
            usage["server_tool_use"] = {"web_search_requests": self.web_search_requests, "web_fetch_requests": 0}
        return usage

    @property
    def awaiting_tools(self) -> bool:
        """The upstream call ended with server-tool calls to run (`server_calls`)."""
        return self.lifecycle is Lifecycle.AWAITING_TOOLS

    # ------------------------------------------------------------------ public steps

    def start(self) -> list[Event]:
        """`message_start` (once; `feed`/`finish` call it if the app did not)."""
        if self.lifecycle is not Lifecycle.NOT_STARTED:
            return []
        self.lifecycle = _STREAMING
        message: StartedMessage = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self._usage.initial(),
        }
        return [{"type": "message_start", "message": message}]

    def feed(self, frame: Frame) -> list[Event]:
        """The events of one frame (the relay feeds whole reads to `feed_all`)."""
        if self.finished:
            return []
        out = self.start()
        self._feed_general(frame, out)
        return out

    def _feed_general(self, frame: Frame, out: list[Event]) -> bool:
        """Any frame (`feed_all` joins a read's reply texts before they get here).

        Returns whether the reply is finished now (an exception frame, a stop condition).
        """
        headers = frame.headers
        message_type = headers.get(":message-type")
        if message_type == "event":
            self._on_event(headers.get(":event-type"), frame.payload, out)
        elif message_type in {"exception", "error"}:
            failure = in_stream_failure(
                frame, input_tokens=self._usage.input_tokens, context_window=self.context_window
            )
            self._fail_into(out, failure)
        else:
            self._ignore(f":message-type {message_type!s}")
        return self.finished

    def feed_all(self, frames: Iterable[Frame]) -> list[Event]:
        """The events of several frames (one upstream read); stops once finished.

        Consecutive reply texts are joined and translated once, so a read of N
        text frames costs one delta instead of N. The reply is the same: tag
        splitting, stop sequences and the token budget do not depend on how the
        text is chunked.
        """
        lifecycle = self.lifecycle
        if lifecycle is not _STREAMING:
            if lifecycle is not Lifecycle.NOT_STARTED:
                return []
            out = self.start()
        else:
            out = []
        texts: list[str] = []
        add_text = texts.append
        loads = _loads
        for frame in frames:
            headers = frame.headers
            if headers.get(":event-type") == "assistantResponseEvent" and headers.get(":message-type") == "event":
                try:
                    content = loads(frame.payload).get("content")
                except (orjson.JSONDecodeError, AttributeError):
                    content = None  # feed() reports it
                if type(content) is str:
                    add_text(content)
                    continue
            if texts:
                self._on_text("".join(texts), out)
                texts.clear()
            if self.finished:
                return out
            if self._feed_general(frame, out):
                return out
        if texts:
            self._on_text("".join(texts), out)
        return out

    def finish(self) -> list[Event]:
        """The upstream body ended cleanly: flush, close, `message_delta` + `message_stop`."""
        if self.finished:
            return []
        out = self.start()
        self._emit_segments(self._splitter.flush(), out)
        if not self.finished:
            self._settle_text(out)
        if self._pending_tool is not None and not self.finished:
            self._judge_tool(out, stream_ended=True)
        if not self.finished and self.server_calls:
            self._blocks.close(out)
            self.lifecycle = Lifecycle.AWAITING_TOOLS
            return out
        if not self.finished:
            if not self.has_content and not self.tools_withheld:
                self.findings.append(
                    StreamFinding(AnomalyKind.EMPTY_REPLY, "Amazon Q ended the reply without any content")
                )
            if self.tools_withheld:
                reason = "max_tokens"
            elif self.tools_emitted:
                reason = "tool_use"
            else:
                reason = "end_turn"
            self._end(out, reason)
        return out

    # ------------------------------------------------------------------ server tools

    def expect_server_calls(self, calls: list[ServerToolCall]) -> None:
        """Calls decided before any upstream call (a request that only asks for a search): the
        message starts by awaiting them."""
        if self.lifecycle is Lifecycle.NOT_STARTED or (self.lifecycle is _STREAMING and not self.has_content):
            self.lifecycle = Lifecycle.AWAITING_TOOLS
            self.server_calls = list(calls)
            self._usage_seen = False

    def server_tool_use(self, call: ServerToolCall) -> list[Event]:
        """The `server_tool_use` block of a call the server is about to run."""
        out = self.start()
        self._blocks.server_tool_use(call.id, call.name, orjson.dumps(call.input).decode(), out)
        return out

    def web_search_result(
        self, call: ServerToolCall, content: list[WebSearchResult] | WebSearchToolResultError, *, searched: bool
    ) -> list[Event]:
        """The `web_search_tool_result` block answering `call`; `searched`: a search was run (counted in usage)."""
        out: list[Event] = []
        if searched:
            self.web_search_requests += 1
        if isinstance(content, list):
            self._result_titles.update((result["url"], result["title"]) for result in content)
        self._blocks.web_search_result(call.id, content, out)
        return out

    def resume(self, input_estimate: int) -> None:
        """The message goes on with the next upstream call's frames (its request estimated at `input_estimate`)."""
        if self.lifecycle is not Lifecycle.AWAITING_TOOLS:
            return
        self.server_calls = []
        self._splitter = ThinkingTagSplitter(enabled=self._thinking_tags)
        if self._usage_seen:
            self._usage.next_call(input_estimate)
        else:
            self._usage.input_estimate = input_estimate  # the first upstream call of the reply
        self._usage_seen = True
        self.lifecycle = _STREAMING

    def end(self, reason: str) -> list[Event]:
        """End the message now with `reason` (`tool_use` after client tools, `pause_turn` at the call limit)."""
        out: list[Event] = []
        if not self.finished:
            self.lifecycle = _STREAMING
            self._end(out, reason)
        return out

    def fail(self, error: AnthropicError) -> list[Event]:
        """The stream broke (decode error, timeout, dropped connection): close the block, then `error`."""
        out: list[Event] = []
        self._fail_into(out, error)
        return out

    # ------------------------------------------------------------------ upstream events

    def _on_event(self, event_type: object, raw: bytes, out: list[Event]) -> None:
        handler = self._handlers.get(event_type)
        if handler is None:
            self._ignore(str(event_type))
            return
        try:
            payload = _loads(raw) if raw else {}
        except orjson.JSONDecodeError as error:
            self._fail_into(out, bad_payload(event_type, f"is not valid JSON ({error})"))
            return
        if type(payload) is not dict:
            self._fail_into(out, bad_payload(event_type, "is not a JSON object"))
            return
        if len(payload) == 1 and type(payload.get(event_type)) is dict:
            payload = payload[event_type]  # the `{"<eventName>": {...}}` wrapping some streams use
        handler(payload, out)

    def _on_assistant_response(self, payload: dict[str, Any], out: list[Event]) -> None:
        content = payload.get("content")
        if type(content) is str:
            self._on_text(content, out)

    def _on_reasoning(self, payload: dict[str, Any], out: list[Event]) -> None:
        if self._pending_tool is not None:
            self._judge_tool(out)
        text = payload.get("text")
        if type(text) is str and text:
            if self._blocks.open is not OpenBlock.THINKING:
                self._settle_tagged_text(out)
                if self.finished:
                    return
            self._emit_thinking(text, out)
        signature = payload.get("signature")
        if type(signature) is str and signature:
            self._blocks.note_signature(signature)
        redacted = payload.get("redactedContent")
        if type(redacted) is str and redacted and not self.finished:
            self._settle_tagged_text(out)
            if not self.finished:
                self._blocks.redacted_thinking(redacted, out)

    def _on_tool_use(self, payload: dict[str, Any], out: list[Event]) -> None:
        tool_use_id = payload.get("toolUseId")
        tool_use_id = tool_use_id if type(tool_use_id) is str else ""
        name = payload.get("name")
        name = name if type(name) is str else ""
        pending = self._pending_tool
        if pending is not None and pending.tool_use_id != tool_use_id:
            # A new call without `stop` for the previous one: judge that one as its input stands.
            self._judge_tool(out)
            pending = None
        if pending is None:
            if tool_use_id in self._judged_tool_ids:
                detail = {"tool_use_id": tool_use_id}
                self.findings.append(
                    StreamFinding(AnomalyKind.LATE_TOOL_USE_EVENT, "ignored an event of a judged call", detail)
                )
                return
            self._settle_tagged_text(out)
            if self.finished:
                return
            self._blocks.close(out)
            pending = self._pending_tool = ToolInputBuffer(tool_use_id, name)
        elif name and not pending.name:
            pending.name = name
        pending.add(payload.get("input"))
        if payload.get("stop") is True:
            pending.stopped = True
            self._judge_tool(out)

    def _on_citation(self, payload: dict[str, Any], out: list[Event]) -> None:
        """`citationEvent {citationLink, citationText?, target}` (docs/protocol.md#event-types) → a citation of the text."""
        link = payload.get("citationLink")
        if type(link) is not str or not link:
            return
        text = payload.get("citationText")
        self._blocks.citation(
            {
                "type": "web_search_result_location",
                "url": link,
                "title": self._result_titles.get(link),
                "cited_text": text if type(text) is str else "",
            },
            out,
        )

    def _on_invalid_state(self, payload: dict[str, Any], out: list[Event]) -> None:
        detail = {"reason": payload.get("reason"), "message": payload.get("message")}
        self.findings.append(
            StreamFinding(AnomalyKind.INVALID_STATE_EVENT, "Amazon Q reported an invalid state", detail)
        )

    def _ignore(self, event_type: str) -> None:
        self.ignored_events[event_type] = self.ignored_events.get(event_type, 0) + 1

    # ------------------------------------------------------------------ text and thinking

    def _on_text(self, content: str, out: list[Event]) -> None:
        if not content:
            return
        if self._pending_tool is not None:
            self._judge_tool(out)
        if self._blocks.open is _TEXT_OPEN:
            # Hot path: plain text continuing the open text block.
            text = self._splitter.take_plain(content)
            if text is not None:
                if text:
                    self._emit_text(text, out)
                return
        self._emit_segments(self._splitter.feed(content), out)

    def _emit_segments(self, segments: list[tuple[SegmentKind, str]], out: list[Event]) -> None:
        for kind, text in segments:
            if self.finished:
                return
            if kind is _TEXT:
                self._emit_text(text, out)
            elif kind is _THINKING:
                self._emit_thinking(text, out)
            elif self._blocks.open is OpenBlock.THINKING:  # THINKING_END
                self._blocks.close(out)

    def _emit_text(self, text: str, out: list[Event]) -> None:
        matched = None
        if self._stop_matcher is not None:
            text, matched = self._stop_matcher.feed(text)
        if text and not self._text(self._counter.admit(text), len(text), out):
            return
        if matched is not None:
            self.stop_sequence = matched
            self._end(out, "stop_sequence")

    def _text(self, admitted: str, wanted: int, out: list[Event]) -> bool:
        """Write admitted text (`wanted`: its length before the budget cut); False if the reply ended."""
        if admitted:
            self._blocks.text(admitted, out)
        if len(admitted) < wanted:
            self._end(out, "max_tokens")
            return False
        return True

    def _emit_thinking(self, text: str, out: list[Event]) -> None:
        admitted = self._counter.admit(text)
        if admitted:
            self._blocks.thinking(admitted, out)
        if len(admitted) < len(text):
            self._end(out, "max_tokens")

    def _settle_tagged_text(self, out: list[Event]) -> None:
        """Before a block that does not come from the text stream: release held-back text.

        A tool call or redacted block also ends an unterminated inline `<thinking>`.
        """
        self._emit_segments(self._splitter.drain(), out)
        self._splitter.leave_thinking()
        if not self.finished:
            self._settle_text(out)

    def _settle_text(self, out: list[Event]) -> None:
        if self._stop_matcher is not None:
            held = self._stop_matcher.drain()
            if held:
                self._text(self._counter.admit(held), len(held), out)

    # ------------------------------------------------------------------ tools

    def _judge_tool(self, out: list[Event], *, stream_ended: bool = False) -> None:
        pending = self._pending_tool
        assert pending is not None
        self._pending_tool = None
        self._judged_tool_ids.add(pending.tool_use_id)
        verdict, input_json = pending.judge()
        if stream_ended and not pending.stopped and verdict is ToolInputVerdict.EMPTY:
            # Cut before any input arrived: "no input" cannot be told from "input lost".
            verdict = ToolInputVerdict.TRUNCATED
        name = self._tool_names.get(pending.name, pending.name)
        server_tool = self._server_tools.get(pending.name)
        if server_tool is not None and verdict in (ToolInputVerdict.COMPLETE, ToolInputVerdict.EMPTY):
            # Not the client's tool: the server runs it once this upstream call ends.
            self._counter.add(input_json)
            tool_input = _loads(input_json)
            self.server_calls.append(
                new_call(server_tool, tool_input if type(tool_input) is dict else {}, pending.tool_use_id or None)
            )
            return
        if verdict is ToolInputVerdict.COMPLETE or verdict is ToolInputVerdict.EMPTY:
            if not pending.stopped:
                self.findings.append(missing_stop_finding(pending, name))
            self._counter.add(input_json)
            tool_use_id = self._tool_use_ids.get(pending.tool_use_id, pending.tool_use_id)
            tool_use_id = tool_use_id or f"toolu_{uuid.uuid4().hex[:24]}"
            self._blocks.tool_use(tool_use_id, name, input_json, out)
            self.tools_emitted += 1
        else:
            self.tools_withheld += 1
            self.findings.append(truncation_finding(pending, name, verdict))

    # ------------------------------------------------------------------ endings

    def _end(self, out: list[Event], reason: str) -> None:
        self._blocks.close(out)
        self.stop_reason = reason
        self.lifecycle = Lifecycle.DONE
        out.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": self.stop_sequence},
                "usage": self.usage,
            }
        )
        out.append(_MESSAGE_STOP)

    def _fail_into(self, out: list[Event], error: AnthropicError) -> None:
        if self.finished:
            return
        self._blocks.close(out)
        if self._pending_tool is not None:
            detail = {"tool_use_id": self._pending_tool.tool_use_id}
            self.findings.append(
                StreamFinding(AnomalyKind.TOOL_INPUT_LOST, "the stream failed during a tool call", detail)
            )
            self._pending_tool = None
        self.failure = error
        self.lifecycle = Lifecycle.FAILED
        out.append(error_event(error.error_type, error.message))
