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

Each kind of block has its own module; the translator decides when each one writes and when the
message ends. Text and thinking: q2api/translation/reply_text.py (the `<thinking>` tag splitter, the
stop-sequence matcher, the max_tokens budget, all chunking-independent, which is what lets `feed_all`
join a read's texts into one delta). Tool use: q2api/translation/tool_input.py (buffered, judged once,
whose call it is). Server tools: q2api/translation/server_tools.py. Usage and credits:
q2api/translation/usage.py. The events it reads, and their payloads: q2api/translation/reply_events.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, assert_never

import orjson

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.events import (
    ContextManagement,
    IterationUsage,
    MessageDeltaEvent,
    MessageStopEvent,
    RefusalDetails,
    StartedMessage,
    StopDelta,
    StreamEvent,
    Usage,
    WebSearchResult,
    WebSearchToolResultError,
    error_event,
)
from q2api.translation.anomalies import AnomalyKind, StreamFinding
from q2api.translation.content_blocks import ContentBlocks, OpenBlock
from q2api.translation.error_mapping import in_stream_failure
from q2api.translation.phases import Lifecycle, Phase
from q2api.translation.reply_events import EVENT_TYPES, event_payload, invalid_state_finding, upstream_ending
from q2api.translation.reply_text import ReplyText, TextEnd
from q2api.translation.server_tools import ServerToolCall, ServerToolCalls
from q2api.translation.stop_conditions import OutputTokenCounter
from q2api.translation.tool_input import (
    ClientToolUse,
    ServerToolUse,
    ToolCalls,
    WithheldToolUse,
    late_event_finding,
    lost_input_finding,
    oversized_input_finding,
)
from q2api.translation.usage import ReplyUsage, with_this_message

if TYPE_CHECKING:
    from q2api.amazonq.eventstream import Frame

Event = StreamEvent


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
        max_reply_bytes: int | None = None,
        context_window: int = 200_000,
        thinking_tags: bool = True,
        message_id: str | None = None,
        server_tools: Mapping[str, str] | None = None,
    ) -> None:
        """`server_tools`: Amazon Q tool name → the server tool it stands for (`web_search`): calls
        of these are withheld from the client and collected in `server_calls`."""
        # What a translator for a further call replacing this one's content needs (`rewound`).
        self._options: dict[str, Any] = {
            "model": model,
            "tool_names": tool_names,
            "tool_use_ids": tool_use_ids,
            "stop_sequences": tuple(stop_sequences),
            "max_tokens": max_tokens,
            "max_reply_bytes": max_reply_bytes,
            "context_window": context_window,
            "thinking_tags": thinking_tags,
            "server_tools": server_tools,
        }
        self.model = model
        self.message_id = message_id or f"msg_{uuid.uuid4().hex[:24]}"
        self.context_window = context_window
        self.lifecycle = Lifecycle.NOT_STARTED
        self.failure: AnthropicError | None = None
        self.stop_reason: str | None = None
        self.findings: list[StreamFinding] = []
        self.ignored_events: dict[str, int] = {}
        self.tools_emitted = 0
        self.tools_withheld = 0
        # `{"applied_edits": [...]}`: the request asked for context management; its message_delta says what was done.
        self.context_management: ContextManagement | None = None
        self.stop_details: RefusalDetails | None = None
        self.iterations: list[IterationUsage] | None = None  # a compaction's summary, before this message
        self._upstream_stop: str | None = None  # a `stopReason` Amazon Q put in a metadataEvent

        self._blocks = ContentBlocks()
        self._usage = ReplyUsage(input_tokens, context_window)
        self._counter = OutputTokenCounter(max_tokens, max_reply_bytes)  # text, thinking and tool input all spend it
        self._text = ReplyText(self._blocks, self._counter, self._options["stop_sequences"], thinking_tags)
        # Ids the conversion changed: the client gets its own back.
        self._tools = ToolCalls(tool_names or {}, tool_use_ids or {}, dict(server_tools or {}))
        self._server = ServerToolCalls(offered=bool(server_tools))

    # ------------------------------------------------------------------ status

    @property
    def phase(self) -> Phase:
        lifecycle = self.lifecycle
        if lifecycle is not _STREAMING:
            return Phase[lifecycle.name]
        if self._tools.pending is not None:
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
    def stop_sequence(self) -> str | None:
        """The stop sequence the reply ended on, if it did."""
        return self._text.stop_sequence

    @property
    def usage(self) -> Usage:
        """Cumulative usage so far (the final one once finished)."""
        usage = self._usage.snapshot(self._counter.total)
        if self._server.offered:
            usage["server_tool_use"] = self._server.usage()
        if self.iterations is not None:
            usage["iterations"] = with_this_message(self.iterations, usage)
        return usage

    @property
    def server_calls(self) -> list[ServerToolCall]:
        """The server-tool calls made in the current upstream call, for the server to run."""
        return self._server.pending

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
        if self._ended_by(self._text.flush(out), out):
            return out
        if self._tools.pending is not None:
            self._judge_tool(out, stream_ended=True)
        if not self.finished and self._server.pending:
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
                reason, self.stop_details = upstream_ending(self._upstream_stop, context_full=self._usage.context_full)
            self._end(out, reason)
        return out

    # ------------------------------------------------------------------ server tools

    def expect_server_calls(self, calls: list[ServerToolCall]) -> None:
        """Calls decided before any upstream call (a request that only asks for a search): the
        message starts by awaiting them."""
        if self.lifecycle is Lifecycle.NOT_STARTED or (self.lifecycle is _STREAMING and not self.has_content):
            self.lifecycle = Lifecycle.AWAITING_TOOLS
            self._server.pending = list(calls)
            self._usage.before_first_call()

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
        self._server.shown(content, searched=searched)
        self._blocks.web_search_result(call.id, content, out)
        return out

    def resume(self, input_estimate: int) -> None:
        """The message goes on with the next upstream call's frames (its request estimated at `input_estimate`)."""
        if self.lifecycle is not Lifecycle.AWAITING_TOOLS:
            return
        self._server.pending = []
        self._text.restart()
        self._usage.next_call(input_estimate)
        self.lifecycle = _STREAMING

    def compaction(self, summary: str | None) -> list[Event]:
        """The `compaction` block that opens a reply which summarised the conversation (q2api.frontdoors.claude.compaction)."""
        out = self.start()
        self._blocks.compaction(summary, out)
        return out

    def estimate_input(self, input_estimate: int) -> None:
        """The request the next upstream call sends is estimated at this (a compacted conversation is shorter)."""
        self._usage.input_estimate = input_estimate

    def add_credits(self, credits: float | None) -> None:
        """Credits Amazon Q metered for a call made for this reply by another translator."""
        self._usage.add_credits(credits)

    def rewound(self, input_estimate: int) -> StreamTranslator:
        """A translator for a further upstream call whose reply replaces this one's content, which the
        client never saw (it was held and found wanting, q2api.translation.held_reply). The message
        has started; the usage adds up both calls, as Amazon Q bills both."""
        fresh = StreamTranslator(**self._options, message_id=self.message_id)
        fresh.lifecycle = _STREAMING
        fresh.context_management = self.context_management
        fresh.iterations = self.iterations
        fresh._usage = self._usage
        fresh._usage.next_call(input_estimate)
        fresh.findings = self.findings
        return fresh

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
        kind = EVENT_TYPES.get(event_type)
        if kind is None:
            self._ignore(str(event_type))
            return
        payload = event_payload(kind, raw)
        if isinstance(payload, AnthropicError):
            self._fail_into(out, payload)
            return
        match kind:
            case "assistantResponseEvent":
                content = payload.get("content")
                if type(content) is str:
                    self._on_text(content, out)
            case "toolUseEvent":
                self._on_tool_use(payload, out)
            case "reasoningContentEvent":
                self._on_reasoning(payload, out)
            case "metadataEvent":
                self._usage.note_metadata(payload)
                stop = payload.get("stopReason")
                if type(stop) is str:
                    self._upstream_stop = stop
            case "contextUsageEvent":
                self._usage.note_context_usage(payload)
            case "meteringEvent":
                self._usage.note_metering(payload)
            case "invalidStateEvent":
                self.findings.append(invalid_state_finding(payload))
            case "citationEvent":
                self._on_citation(payload, out)
            case unknown:
                assert_never(unknown)

    def _ignore(self, event_type: str) -> None:
        self.ignored_events[event_type] = self.ignored_events.get(event_type, 0) + 1

    def _on_text(self, content: str, out: list[Event]) -> None:
        if not content:
            return
        if self._tools.pending is not None:
            self._judge_tool(out)
        end = self._text.text(content, out)
        if end is not None:
            self._end(out, end)

    def _on_reasoning(self, payload: dict[str, Any], out: list[Event]) -> None:
        if self._tools.pending is not None:
            self._judge_tool(out)
        text = payload.get("text")
        if type(text) is str and text and self._ended_by(self._text.native_thinking(text, out), out):
            return
        signature = payload.get("signature")
        if type(signature) is str and signature:
            self._blocks.note_signature(signature)
        redacted = payload.get("redactedContent")
        if type(redacted) is str and redacted:
            self._ended_by(self._text.redacted_thinking(redacted, out), out)

    def _on_tool_use(self, payload: dict[str, Any], out: list[Event]) -> None:
        tool_use_id = payload.get("toolUseId")
        tool_use_id = tool_use_id if type(tool_use_id) is str else ""
        name = payload.get("name")
        name = name if type(name) is str else ""
        pending = self._tools.pending
        if pending is not None and pending.tool_use_id != tool_use_id:
            # A new call without `stop` for the previous one: judge that one as its input stands.
            self._judge_tool(out)
            pending = None
        if pending is None:
            if self._tools.judged(tool_use_id):
                self.findings.append(late_event_finding(tool_use_id))
                return
            if self._ended_by(self._text.settle(out), out):
                return
            self._blocks.close(out)
            pending = self._tools.begin(tool_use_id, name)
        elif name and not pending.name:
            pending.name = name
        pending.add(payload.get("input"))
        if self._counter.over_bytes(pending.received_bytes):
            # A tool input past the reply's byte bound is withheld, as one cut off, and the reply
            # ends at the bound like a text would: with max_tokens.
            self._tools.pending = None
            self.tools_withheld += 1
            self.findings.append(oversized_input_finding(pending, self._counter.byte_limit or 0))
            self._end(out, "max_tokens")
            return
        if payload.get("stop") is True:
            pending.stopped = True
            self._judge_tool(out)

    def _judge_tool(self, out: list[Event], *, stream_ended: bool = False) -> None:
        match self._tools.judge(stream_ended=stream_ended):
            case ClientToolUse(tool_use_id, name, input_json, finding):
                if finding is not None:
                    self.findings.append(finding)
                self._counter.add(input_json)
                self._blocks.tool_use(tool_use_id, name, input_json, out)
                self.tools_emitted += 1
            case ServerToolUse(call, input_json):
                # Not the client's tool: the server runs it once this upstream call ends.
                self._counter.add(input_json)
                self._server.pending.append(call)
            case WithheldToolUse(finding):
                self.tools_withheld += 1
                self.findings.append(finding)
            case unknown:
                assert_never(unknown)

    def _on_citation(self, payload: dict[str, Any], out: list[Event]) -> None:
        """`citationEvent {citationLink, citationText?, target}` (docs/protocol.md#event-types) → a citation of the text."""
        link = payload.get("citationLink")
        if type(link) is str and link:
            text = payload.get("citationText")
            self._blocks.citation(self._server.citation(link, text if type(text) is str else ""), out)

    # ------------------------------------------------------------------ endings

    def _ended_by(self, end: TextEnd | None, out: list[Event]) -> bool:
        """End the message if the text just written says so (a stop sequence, the token budget)."""
        if end is None:
            return False
        self._end(out, end)
        return True

    def _end(self, out: list[Event], reason: str) -> None:
        self._blocks.close(out)
        self.stop_reason = reason
        self.lifecycle = Lifecycle.DONE
        delta: StopDelta = {"stop_reason": reason, "stop_sequence": self.stop_sequence}
        if self.stop_details is not None and reason == "refusal":
            delta["stop_details"] = self.stop_details
        event: MessageDeltaEvent = {"type": "message_delta", "delta": delta, "usage": self.usage}
        if self.context_management is not None:
            event["context_management"] = self.context_management
        out.append(event)
        out.append(_MESSAGE_STOP)

    def _fail_into(self, out: list[Event], error: AnthropicError) -> None:
        if self.finished:
            return
        self._blocks.close(out)
        if self._tools.pending is not None:
            self.findings.append(lost_input_finding(self._tools.pending))
            self._tools.pending = None
        self.failure = error
        self.lifecycle = Lifecycle.FAILED
        out.append(error_event(error.error_type, error.message))
