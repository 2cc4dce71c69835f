"""Claude stream events → OpenAI `chat.completion.chunk` lines, and a Claude message → `chat.completion`.

Both paths read the same Claude events the native door sends (the stream directly, the JSON
answer through `MessageAggregator`), so the two OpenAI shapes agree by construction:

* `message_start` → the first chunk, `{"role": "assistant", "content": ""}`;
* text deltas → `content`; thinking deltas → `reasoning_content` (only when asked for);
* a `tool_use` block → a `tool_calls` entry with its `index`, `id` and name, then its JSON
  `arguments` in pieces (the legacy `functions` form: `function_call`);
* `message_delta` → the chunk with `finish_reason`; then, when asked, the usage chunk, and
  `data: [DONE]`;
* an `error` event → `data: {"error": {...}}`, which the openai SDK raises, and no `[DONE]`.

With `response_format` the finished text is checked first: a reply that fails is answered with
an error (a 422 `invalid_response_format` that no client retries, or the error chunk in a
stream), not a success.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, assert_never

import orjson

from q2api.anthropic.events import StreamEvent, Usage
from q2api.frontdoors.chat.request import ReplyOptions
from q2api.frontdoors.openai_shared import INVALID_RESPONSE_STATUS, NO_RETRY, ChatError, stream_error_body
from q2api.openai import shapes
from q2api.openai.errors import OpenAIError
from q2api.openai.shapes import FinishReason

_FINISH_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_DONE = b"data: [DONE]\n\n"
Report = Callable[[str], None]


def finish_reason(stop_reason: str | None, options: ReplyOptions) -> FinishReason:
    reason = _FINISH_REASONS.get(stop_reason or "end_turn", "stop")
    return "function_call" if reason == "tool_calls" and options.legacy_functions else reason


def openai_usage(usage: Usage) -> dict[str, Any]:
    """OpenAI counts cached prompt tokens inside `prompt_tokens`; Claude counts them apart."""
    cached = usage.get("cache_read_input_tokens", 0)
    prompt = usage.get("input_tokens", 0) + cached + usage.get("cache_creation_input_tokens", 0)
    return shapes.usage(prompt, usage.get("output_tokens", 0), cached)


def completion_id(message_id: str) -> str:
    return "chatcmpl-" + message_id.removeprefix("msg_")


def invalid_response(problem: str) -> OpenAIError:
    return OpenAIError(
        INVALID_RESPONSE_STATUS,
        f"response_format could not be honoured: {problem}. Amazon Q has no JSON mode; q2api instructs the "
        "model and checks its reply",
        error_type="server_error",
        param="response_format",
        code="invalid_response_format",
        headers=NO_RETRY,
    )


def chat_completion(message: dict[str, Any], options: ReplyOptions, *, created: int, report: Report) -> dict[str, Any]:
    """The `chat.completion` for an aggregated Claude message; raises ChatError if `response_format` failed."""
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in message["content"]:
        if block["type"] == "text":
            texts.append(block["text"])
        elif block["type"] == "thinking":
            reasoning.append(block["thinking"])
        elif block["type"] == "tool_use":
            arguments = orjson.dumps(block["input"]).decode()
            calls.append(
                {"id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": arguments}}
            )
    finish = finish_reason(message["stop_reason"], options)
    text = "".join(texts)
    if options.check is not None and finish == "stop":
        problem = options.check.problem(text)
        if problem is not None:
            raise ChatError(invalid_response(problem))
    reply: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else ""), "refusal": None}
    if calls and options.legacy_functions:
        if len(calls) > 1:
            report(f"legacy function_call carries one call: {len(calls) - 1} later call(s) of this reply not returned")
        reply["function_call"] = calls[0]["function"]
    elif calls:
        reply["tool_calls"] = calls
    if options.show_reasoning and reasoning:
        reply["reasoning_content"] = "".join(reasoning)
    return shapes.completion(
        completion_id=completion_id(message["id"]),
        created=created,
        model=message["model"],
        message=reply,
        finish_reason=finish,
        usage=openai_usage(message["usage"]),
    )


class ChatChunkEncoder:
    """Claude stream events → `chat.completion.chunk` SSE lines (an EventEncoder of q2api.server.lifecycle.streaming).

    Stateful: one per streamed request.
    """

    ping = b": ping\n\n"  # an SSE comment: clients skip it, proxies see traffic

    def __init__(self, options: ReplyOptions, *, created: int, report: Report) -> None:
        self._options = options
        self._created = created
        self._report = report
        self._id = "chatcmpl-"
        self._model = ""
        self._tool_index: dict[int, int | None] = {}  # Claude block index → tool_calls index (None: not sent)
        self._text: list[str] = []  # kept only when response_format is checked
        self._usage: Usage = {}
        self._failed = False

    def encode(self, events: Sequence[StreamEvent]) -> bytes:
        chunks: list[dict[str, Any]] = []
        for event in events:
            self._add(event, chunks)
        return b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks)

    def answer(self) -> None:
        return None  # the Chat Completions door has no `after` hook

    def trailer(self) -> bytes:
        if self._failed:
            return b""  # the error chunk was the end: no [DONE] after a failure
        if self._options.include_usage:
            usage_chunk = self._chunk(None, usage=openai_usage(self._usage))
            return b"data: " + orjson.dumps(usage_chunk) + b"\n\n" + _DONE
        return _DONE

    # ------------------------------------------------------------------ events

    def _add(self, event: StreamEvent, out: list[dict[str, Any]]) -> None:
        if self._failed:
            return
        match event["type"]:
            case "content_block_delta":
                self._on_delta(event["index"], event["delta"], out)
            case "content_block_start":
                self._on_block_start(event["index"], event["content_block"], out)
            case "content_block_stop" | "message_stop" | "ping":
                pass
            case "message_start":
                started = event["message"]
                self._id = completion_id(started["id"])
                self._model = started["model"]
                self._usage = dict(started["usage"])  # type: ignore[assignment]
                out.append(self._chunk({"role": "assistant", "content": ""}))
            case "message_delta":
                self._usage.update(event["usage"])
                self._finish(finish_reason(event["delta"]["stop_reason"], self._options), out)
            case "error":
                self._failed = True
                out.append({"error": stream_error_body(dict(event["error"]))})
            case unknown:
                assert_never(unknown)

    def _on_block_start(self, index: int, block: Any, out: list[dict[str, Any]]) -> None:
        if block["type"] != "tool_use":
            return
        position = len([sent for sent in self._tool_index.values() if sent is not None])
        if self._options.legacy_functions and position >= 1:
            self._tool_index[index] = None
            self._report("legacy function_call carries one call: a later call of this reply was not streamed")
            return
        self._tool_index[index] = position
        function = {"name": block["name"], "arguments": ""}
        if self._options.legacy_functions:
            out.append(self._chunk({"function_call": function}))
        else:
            call = {"index": position, "id": block["id"], "type": "function", "function": function}
            out.append(self._chunk({"tool_calls": [call]}))

    def _on_delta(self, index: int, delta: Any, out: list[dict[str, Any]]) -> None:
        kind = delta["type"]
        if kind == "text_delta":
            if self._options.check is not None:
                self._text.append(delta["text"])
            out.append(self._chunk({"content": delta["text"]}))
        elif kind == "thinking_delta":
            if self._options.show_reasoning:
                out.append(self._chunk({"reasoning_content": delta["thinking"]}))
        elif kind == "input_json_delta":
            position = self._tool_index.get(index)
            if position is None:
                return
            if self._options.legacy_functions:
                out.append(self._chunk({"function_call": {"arguments": delta["partial_json"]}}))
            else:
                out.append(
                    self._chunk({"tool_calls": [{"index": position, "function": {"arguments": delta["partial_json"]}}]})
                )
        # signature_delta: Claude's thinking signature has no OpenAI counterpart.

    def _finish(self, finish: FinishReason, out: list[dict[str, Any]]) -> None:
        check = self._options.check
        if check is not None and finish == "stop":
            problem = check.problem("".join(self._text))
            if problem is not None:
                self._failed = True
                self._report(f"response_format: {problem}")
                out.append(invalid_response(problem).envelope())
                return
        out.append(self._chunk({}, finish_reason=finish))

    def _chunk(
        self, delta: dict[str, Any] | None, *, finish_reason: FinishReason | None = None, usage: Any = None
    ) -> dict[str, Any]:
        chunk = shapes.chunk(
            completion_id=self._id,
            created=self._created,
            model=self._model,
            delta=delta,
            finish_reason=finish_reason,
            usage=usage,
        )
        if self._options.include_usage and usage is None:
            chunk["usage"] = None  # OpenAI's convention: every chunk but the last says "no usage yet"
        return chunk
