"""Reply scripts for the simulated Amazon Q upstream.

A script is plain data: either an :class:`ErrorReply` (a non-200 HTTP reply)
or a :class:`StreamReply` (a 200 event stream made of steps: bytes to send,
pauses, holds until the test releases them, a dropped connection). Frames are encoded when the script is built,
so the simulator only writes bytes and sleeps — its per-chunk cost stays the
floor the gateway's benchmarks are measured against.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Iterable, Mapping

import orjson

from q2api.amazonq.eventstream import encode_error, encode_event, encode_exception
from q2api.testing import assumptions
from q2api.testing.assumptions import SIMULATOR

NAMESPACE = "com.amazon.aws.codewhisperer"
BEARER_INVALID_MESSAGE = SIMULATOR.text(assumptions.BEARER_INVALID_MESSAGE)
PROFILE_REQUIRED_MESSAGE = SIMULATOR.text(assumptions.PROFILE_REQUIRED_MESSAGE)
MONTHLY_QUOTA_MESSAGE = f"Maximum {NAMESPACE}.streaming.GenerateAssistantResponse reached for this month."


@dataclasses.dataclass(frozen=True)
class Send:
    data: bytes


@dataclasses.dataclass(frozen=True)
class Pause:
    seconds: float


@dataclasses.dataclass(frozen=True)
class Abort:
    """Drop the TCP connection without ending the body (the client sees a broken transfer)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Hold:
    """Send nothing until the test calls `release()`: a reply kept in flight exactly as long as a test
    needs it, where a `Pause` would guess a duration. For a simulator on the test's own event loop."""

    released: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    def release(self) -> None:
        self.released.set()


Step = Send | Pause | Abort | Hold


@dataclasses.dataclass(frozen=True)
class StreamReply:
    steps: tuple[Step, ...]
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    headers_after: float = 0.0  # seconds of silence before the 200 headers (first-byte latency)

    def then(self, *parts: Step | Iterable[Step]) -> StreamReply:
        return dataclasses.replace(self, steps=self.steps + tuple(_flatten(parts)))


@dataclasses.dataclass(frozen=True)
class ErrorReply:
    status: int
    body: bytes
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Hangup:
    """Close the connection without any reply (the client sees a connection error)."""


Reply = StreamReply | ErrorReply | Hangup


# -- frames -------------------------------------------------------------------


def event(event_type: str, payload: Mapping[str, object]) -> Send:
    return Send(encode_event(event_type, payload))


def text_events(text: str, chunks: int = 1) -> list[Send]:
    return [event("assistantResponseEvent", {"content": piece}) for piece in split_text(text, chunks)]


def thinking_tag_events(thinking: str, chunks: int = 1) -> list[Send]:
    """Thinking the way Q often sends it: `<thinking>` tags inside ordinary text."""
    return text_events(f"<thinking>{thinking}</thinking>", chunks)


def reasoning_events(thinking: str, chunks: int = 1, signature: str | None = None) -> list[Send]:
    sends = [event("reasoningContentEvent", {"text": piece}) for piece in split_text(thinking, chunks)]
    if signature:
        sends.append(event("reasoningContentEvent", {"signature": signature}))
    return sends


def tool_use_events(
    tool_use_id: str,
    name: str,
    tool_input: object,
    fragments: int = 3,
    *,
    input_in_first_event: bool = SIMULATOR.flag(assumptions.TOOL_INPUT_IN_FIRST_EVENT),
    stop_event: bool = SIMULATOR.flag(assumptions.TOOL_STOP_EVENT),
) -> list[Send]:
    """One tool call: a header event, the JSON input in fragments, then `stop: true`
    (docs/protocol.md#tool-use-events; q2api.testing.assumptions says whether the first event already
    carries input and whether the stop event comes)."""
    pieces = split_text(orjson.dumps(tool_input).decode(), fragments)
    sends = [] if input_in_first_event else [event("toolUseEvent", {"toolUseId": tool_use_id, "name": name})]
    for piece in pieces:
        sends.append(event("toolUseEvent", {"toolUseId": tool_use_id, "name": name, "input": piece}))
    if stop_event:
        sends.append(event("toolUseEvent", {"toolUseId": tool_use_id, "name": name, "stop": True}))
    return sends


def usage_event(input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> Send:
    usage = {
        "uncachedInputTokens": input_tokens,
        "outputTokens": output_tokens,
        "totalTokens": input_tokens + output_tokens + cache_read + cache_write,
    }
    if cache_read:
        usage["cacheReadInputTokens"] = cache_read
    if cache_write:
        usage["cacheWriteInputTokens"] = cache_write
    return event("metadataEvent", {"tokenUsage": usage})


def metering_event(credits: float) -> Send:
    """What Amazon Q meters a reply (docs/protocol.md#prompt-caching-and-metering: `{"unit":"credit","unitPlural":"credits","usage":0.03}`)."""
    return event("meteringEvent", {"unit": "credit", "unitPlural": "credits", "usage": credits})


def citation_event(link: str, text: str = "", location: int = 0) -> Send:
    """A citation of the reply text (docs/protocol.md#event-types `citationEvent`)."""
    return event("citationEvent", {"target": {"location": location}, "citationText": text, "citationLink": link})


def context_usage_event(percentage: float) -> Send:
    return event("contextUsageEvent", {"contextUsagePercentage": percentage})


def conversation_event(conversation_id: str = "sim-conversation") -> Send:
    return event("messageMetadataEvent", {"conversationId": conversation_id, "utteranceId": "sim-utterance"})


def exception_frame(message: str, reason: str | None = None, exception_type: str = "error") -> Send:
    payload: dict[str, object] = {"message": message}
    if reason:
        payload["reason"] = reason
    return Send(encode_exception(exception_type, payload))


def error_frame(code: str, message: str) -> Send:
    return Send(encode_error(code, message))


def cut_frame(frame: Send) -> Send:
    """The first half of a frame: the body ends mid-frame."""
    return Send(frame.data[: max(len(frame.data) // 2, 1)])


def corrupt_frame(frame: Send) -> Send:
    """The frame with one payload byte flipped, so its message CRC no longer matches."""
    data = bytearray(frame.data)
    data[-5] ^= 0xFF
    return Send(bytes(data))


# -- whole replies ------------------------------------------------------------


def stream(*parts: Step | Iterable[Step], delay: float = 0.0, headers: Mapping[str, str] | None = None) -> StreamReply:
    """A 200 reply of `parts`; `delay` pauses between consecutive sends."""
    steps: list[Step] = []
    sent_before = False
    for step in _flatten(parts):
        if isinstance(step, Send):
            if delay and sent_before:
                steps.append(Pause(delay))
            sent_before = True
        steps.append(step)
    return StreamReply(tuple(steps), dict(headers or {}))


def text_reply(
    text: str = "Hello from the simulated Amazon Q upstream.",
    *,
    chunks: int = 1,
    delay: float = 0.0,
    input_tokens: int | None = 12,
    output_tokens: int | None = None,
) -> StreamReply:
    parts: list[Step | Iterable[Step]] = [conversation_event(), text_events(text, chunks)]
    if input_tokens is not None:
        parts.append(usage_event(input_tokens, output_tokens if output_tokens is not None else max(len(text) // 4, 1)))
    return stream(*parts, delay=delay)


def thinking_reply(
    thinking: str, text: str, *, style: str = "tags", chunks: int = 1, delay: float = 0.0
) -> StreamReply:
    """`style="tags"`: `<thinking>` text; `style="reasoning"`: reasoningContentEvent frames."""
    thought = (
        thinking_tag_events(thinking, chunks) if style == "tags" else reasoning_events(thinking, chunks, "sim-sig")
    )
    return stream(conversation_event(), thought, text_events(text, chunks), delay=delay)


def tool_reply(
    name: str,
    tool_input: object,
    *,
    tool_use_id: str = "tooluse_sim_1",
    text_before: str | None = None,
    fragments: int = 3,
    delay: float = 0.0,
) -> StreamReply:
    parts: list[Step | Iterable[Step]] = [conversation_event()]
    if text_before:
        parts.append(text_events(text_before))
    parts.append(tool_use_events(tool_use_id, name, tool_input, fragments))
    parts.append(usage_event(20, 10))
    return stream(*parts, delay=delay)


def stalled_reply(seconds: float, *, text_before: str = "Working", text_after: str | None = None) -> StreamReply:
    parts: list[Step | Iterable[Step]] = [conversation_event(), text_events(text_before), Pause(seconds)]
    if text_after:
        parts.append(text_events(text_after))
    return stream(*parts)


def mid_stream_exception(
    message: str = "Encountered an unexpected error when processing the request, please try again.",
    *,
    reason: str | None = None,
    text_before: str = "Partial answer",
) -> StreamReply:
    return stream(conversation_event(), text_events(text_before), exception_frame(message, reason))


def truncated_reply(text_before: str = "Partial answer") -> StreamReply:
    """The body ends cleanly, but in the middle of a frame."""
    return stream(conversation_event(), text_events(text_before), cut_frame(text_events(" more")[0]))


def dropped_reply(text_before: str = "Partial answer") -> StreamReply:
    """The connection drops mid-body."""
    return stream(conversation_event(), text_events(text_before), cut_frame(text_events(" more")[0]), Abort())


def corrupted_reply(text_before: str = "Partial answer") -> StreamReply:
    return stream(conversation_event(), text_events(text_before), corrupt_frame(text_events(" more")[0]))


def http_error(
    status: int,
    code: str | None,
    message: str | None,
    *,
    reason: str | None = None,
    namespaced: bool = True,
    header: bool = True,
    retry_after: int | None = None,
) -> ErrorReply:
    """A JSON error reply as the service sends it (docs/protocol.md#reading-an-error-reply): code in `x-amzn-errortype` and `__type`."""
    body: dict[str, object] = {}
    headers: dict[str, str] = {"Content-Type": "application/x-amz-json-1.0"}
    if code:
        body["__type"] = f"{NAMESPACE}#{code}" if namespaced else code
        if header:
            headers["x-amzn-errortype"] = f"{code}:http://internal.amazon.com/coral/{NAMESPACE}/"
    if message is not None:
        body["message"] = message
    body["reason"] = reason
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return ErrorReply(status, orjson.dumps(body), headers)


def throttled(retry_after: int | None = None) -> ErrorReply:
    return http_error(429, "ThrottlingException", "Rate exceeded", retry_after=retry_after)


def model_overloaded() -> ErrorReply:
    return http_error(
        429,
        "ThrottlingException",
        "I am experiencing high traffic, please try again shortly.",
        reason="INSUFFICIENT_MODEL_CAPACITY",
    )


def monthly_quota() -> ErrorReply:
    return http_error(400, "ThrottlingException", MONTHLY_QUOTA_MESSAGE, reason="MONTHLY_REQUEST_COUNT")


def context_overflow() -> ErrorReply:
    return http_error(400, "ValidationException", "Input is too long.", reason="CONTENT_LENGTH_EXCEEDS_THRESHOLD")


def improperly_formed() -> ErrorReply:
    return http_error(400, "ValidationException", "Improperly formed request.")


def hangup() -> Hangup:
    return Hangup()


def slow_headers(seconds: float, reply: StreamReply | None = None) -> StreamReply:
    """`reply` (default: a short text) whose headers arrive only after `seconds`."""
    return dataclasses.replace(reply or text_reply("late"), headers_after=seconds)


def bearer_invalid() -> ErrorReply:
    """What the service sends for an expired or revoked access token (no error type at all)."""
    return ErrorReply(
        SIMULATOR.number(assumptions.BEARER_INVALID_STATUS),
        orjson.dumps({"message": BEARER_INVALID_MESSAGE, "reason": None}),
        {"Content-Type": "application/x-amz-json-1.0"},
    )


def profile_required() -> ErrorReply:
    """What a host that needs a `profileArn` answers a request without one (no error type; docs/protocol.md#profiles)."""
    return ErrorReply(
        SIMULATOR.number(assumptions.PROFILE_REQUIRED_STATUS),
        orjson.dumps({"message": PROFILE_REQUIRED_MESSAGE, "reason": None}),
        {"Content-Type": "application/json"},
    )


def access_denied(reason: str = "TEMPORARILY_SUSPENDED") -> ErrorReply:
    return http_error(403, "AccessDeniedException", "Your account is temporarily suspended.", reason=reason)


def server_error(status: int = 500) -> ErrorReply:
    return http_error(
        status,
        "InternalServerException",
        "Encountered an unexpected error when processing the request, please try again.",
    )


def service_unavailable() -> ErrorReply:
    return http_error(
        500,
        "ServiceUnavailableException",
        "The service is temporarily unavailable. Please try again later.",
        namespaced=False,
        header=False,
    )


# What travels in the user's message besides the user's words — Claude Code's reminders, and the
# system prompt the gateway moves there (q2api.conversion.system_context) — the echo leaves out.
_REMINDER = re.compile(r"<(system-reminder|system_message)>.*?</\1>", re.DOTALL)


def echo_reply(request_body: object, *, usage: bool = True) -> StreamReply:
    """The default reply: says plainly that it is simulated and quotes the user's message; `usage`: with a
    token usage event of its own (left out where the simulator's closing frames bring one)."""
    said = " ".join(_REMINDER.sub(" ", current_user_text(request_body)).split())
    text = "This reply comes from q2api's simulated Amazon Q upstream (no real model was called)."
    if said:
        text += f" You said: {said[:200]}"
    return text_reply(text, chunks=max(1, min(8, len(text) // 12)), input_tokens=12 if usage else None)


def current_user_text(body: object) -> str:
    try:
        return str(body["conversationState"]["currentMessage"]["userInputMessage"]["content"])  # type: ignore[index]
    except (KeyError, TypeError):
        return ""


def split_text(text: str, chunks: int) -> list[str]:
    """`text` in `chunks` nearly equal, non-empty pieces (fewer if the text is shorter)."""
    chunks = max(1, min(chunks, len(text) or 1))
    size, extra = divmod(len(text), chunks)
    pieces, start = [], 0
    for index in range(chunks):
        end = start + size + (1 if index < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def _flatten(parts: Iterable[Step | Iterable[Step]]) -> Iterable[Step]:
    for part in parts:
        if isinstance(part, (Send, Pause, Abort, Hold)):
            yield part
        else:
            yield from part
