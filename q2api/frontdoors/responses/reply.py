"""Claude stream events → the Responses stream, and the `response` object it builds.

One state machine serves both replies: the stream's events come out of it as they happen, and a
non-streaming reply is the aggregated Claude message played through it (so both agree by
construction: q2api.frontdoors.responses.message_events). Each Claude content block becomes one
output item (its shapes: q2api.frontdoors.responses.output_items):

* `text` → a `message` item: `output_item.added`, `content_part.added`, `output_text.delta`…,
  `output_text.done`, `content_part.done`, `output_item.done`;
* `thinking` → a `reasoning` item, its text as summary (`reasoning_summary_part.added`,
  `reasoning_summary_text.delta`…, `.done`, `reasoning_summary_part.done`) when the request asked
  for `reasoning.summary`, else as reasoning text (`content_part.added`, `reasoning_text.delta`…,
  `.done`, `content_part.done`); the signature is its `encrypted_content` when asked for;
* `tool_use` → a `function_call` item: `function_call_arguments.delta`…, `.done`; of a custom tool,
  a `custom_tool_call` item: `custom_tool_call_input.delta`… (the input text as the model writes
  it, custom_tools.InputStream), `.done`;
* the gateway's web search (`server_tool_use` named `web_search`, then its `web_search_tool_result`)
  → a `web_search_call` item: `web_search_call.in_progress` when the call starts, `.searching`
  while the search runs, `.completed` and `output_item.done` with the result; a failed search is
  the item with status `failed` (the SDK's `ResponseFunctionWebSearch.status`), and the turn goes
  on. Its action is `{"type": "search", "query"}`, with the result URLs as `sources` when the
  request included `web_search_call.action.sources`;
* a text block's citations → `url_citation` annotations of its `output_text`, each announced by
  `output_text.annotation.added` once the text is complete (the span is the cited text where the
  text holds it, else the whole text: Amazon Q's citation has no position the reply keeps).

`message_start` opens the stream (`response.created`, `response.in_progress`); `message_stop`
closes it with `response.completed`, or `response.incomplete` (output limit, refusal); an
`error` event ends it with `error` and `response.failed`. The events as the official SDK's
`responses.stream()` and Codex read them (the SDK checks every item's identity and index).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

import orjson

from q2api.anthropic.events import StreamEvent, Usage
from q2api.frontdoors.openai_shared import INVALID_RESPONSE_STATUS, NO_RETRY
from q2api.frontdoors.responses.custom_tools import InputStream
from q2api.frontdoors.responses.output_items import Kind, OpenItem, item_object, reasoning_share, url_citation
from q2api.frontdoors.responses.request import ReplyOptions, new_id
from q2api.frontdoors.responses.tools import ToolName
from q2api.frontdoors.responses.web_search import WEB_SEARCH
from q2api.openai import responses_shapes as shapes
from q2api.openai.errors import OpenAIError

Report = Callable[[str], None]
Event = dict[str, Any]
# Claude's stop reasons that leave a response incomplete, and why (the `incomplete_details.reason`).
_INCOMPLETE = {
    "max_tokens": "max_output_tokens",
    "model_context_window_exceeded": "max_output_tokens",
    "refusal": "content_filter",
}
# Claude error types in a broken stream → the `code` OpenAI clients act on (Codex retries rate limits).
_STREAM_ERROR_CODES = {
    "rate_limit_error": "rate_limit_exceeded",
    "invalid_request_error": "invalid_prompt",
}


def invalid_text_format(problem: str) -> OpenAIError:
    """A reply that failed `text.format`: the chat door's 422 (no SDK retries it), in this door's words."""
    return OpenAIError(
        INVALID_RESPONSE_STATUS,
        f"text.format could not be honoured: {problem}. Amazon Q has no JSON mode; q2api instructs the "
        "model and checks its reply",
        error_type="server_error",
        param="text.format",
        code="invalid_response_format",
        headers=NO_RETRY,
    )


@dataclass(frozen=True, slots=True)
class ResponseFrame:
    """What the response object says besides its output: its id, the client's model, the echoed settings."""

    response_id: str
    model: str
    echo: dict[str, Any]
    created_at: int = field(default_factory=lambda: int(time.time()))


class Phase(enum.Enum):
    WAITING = "waiting"  # no message_start yet
    OPEN = "open"
    FINISHED = "finished"  # completed, incomplete or failed: the final response is known


class ResponseBuilder:
    """Claude stream events → Responses stream events; `final` is the response once the stream ended.

    Stateful: one per reply.
    """

    def __init__(self, frame: ResponseFrame, options: ReplyOptions, *, report: Report) -> None:
        self._frame = frame
        self._options = options
        self._report = report
        self._phase = Phase.WAITING
        self._sequence = 0
        self._items: list[OpenItem] = []  # in output order
        self._by_block: dict[int, OpenItem] = {}  # Claude block index → its item
        self._searches: dict[str, OpenItem] = {}  # Claude id of a web search call → its item, until its result
        self._usage: Usage = {}
        self._stop_reason: str | None = None
        self.final: dict[str, Any] | None = None
        self.refusal: OpenAIError | None = None  # the reply failed `text.format`: what a JSON answer raises

    # ------------------------------------------------------------------ events

    def add(self, event: StreamEvent) -> list[Event]:
        out: list[Event] = []
        if self._phase is Phase.FINISHED:
            return out
        match event["type"]:
            case "content_block_delta":
                self._on_delta(event["index"], event["delta"], out)
            case "content_block_start":
                self._on_block_start(event["index"], event["content_block"], out)
            case "content_block_stop":
                self._on_block_stop(event["index"], out)
            case "message_start":
                self._usage = dict(event["message"]["usage"])  # type: ignore[assignment]
                self._phase = Phase.OPEN
                self._emit(out, "response.created", response=self._response("in_progress"))
                self._emit(out, "response.in_progress", response=self._response("in_progress"))
            case "message_delta":
                self._usage.update(event["usage"])
                self._stop_reason = event["delta"]["stop_reason"]
            case "message_stop":
                self._finish(out)
            case "error":
                error = event["error"]
                code = _STREAM_ERROR_CODES.get(error["type"], "server_error")
                self._fail(code, error["message"] or "the upstream reply failed", out)
            case "ping":
                pass
            case unknown:
                assert_never(unknown)
        return out

    def add_all(self, events: Sequence[StreamEvent]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            out.extend(self.add(event))
        return out

    def _on_block_start(self, index: int, block: Any, out: list[Event]) -> None:
        kind = block["type"]
        position = len(self._items)
        if kind == "text":
            item = OpenItem(Kind.MESSAGE, position, new_id("msg"))
            self._open(index, item, out)
            self._emit(out, "response.content_part.added", **self._where(item), part=shapes.output_text(""))
        elif kind in ("thinking", "redacted_thinking"):
            item = OpenItem(Kind.REASONING, position, new_id("rs"))
            if kind == "redacted_thinking":
                item.signature = block.get("data")
            self._open(index, item, out)
            if kind == "thinking":
                self._open_reasoning_part(item, out)
        elif kind == "tool_use":
            name = self._options.tool_names.get(block["name"], ToolName(block["name"]))
            if name.custom:
                item = OpenItem(Kind.CUSTOM_TOOL_CALL, position, new_id("ctc"), call_id=block["id"], name=name)
                item.custom_input = InputStream()
            else:
                item = OpenItem(Kind.FUNCTION_CALL, position, new_id("fc"), call_id=block["id"], name=name)
            self._open(index, item, out)
        elif kind == "server_tool_use" and block.get("name") == WEB_SEARCH:
            item = OpenItem(Kind.WEB_SEARCH, position, new_id("ws"), call_id=block["id"])
            if block.get("input"):
                item.pieces.append(orjson.dumps(block["input"]).decode())
            self._searches[item.call_id] = item
            self._open(index, item, out)
            self._emit(out, "response.web_search_call.in_progress", **self._where(item, None))
        elif kind == "web_search_tool_result" and block.get("tool_use_id") in self._searches:
            self._on_search_result(self._searches.pop(block["tool_use_id"]), block.get("content"), out)
        else:
            self._report(f"a {kind!r} content block has no Responses form; it was not sent")

    def _open(self, index: int, item: OpenItem, out: list[Event]) -> None:
        self._items.append(item)
        self._by_block[index] = item
        self._emit(
            out, "response.output_item.added", output_index=item.output_index, item=item_object(item, self._options)
        )

    def _open_reasoning_part(self, item: OpenItem, out: list[Event]) -> None:
        item.part_open = True
        if self._options.summaries:
            part = {"type": "summary_text", "text": ""}
            self._emit(out, "response.reasoning_summary_part.added", **self._where(item, "summary"), part=part)
        else:
            part = {"type": "reasoning_text", "text": ""}
            self._emit(out, "response.content_part.added", **self._where(item), part=part)

    def _on_delta(self, index: int, delta: Any, out: list[Event]) -> None:
        item = self._by_block.get(index)
        if item is None:
            return  # a block without a Responses form (reported when it started)
        kind = delta["type"]
        if item.kind is Kind.WEB_SEARCH:
            if kind == "input_json_delta":
                item.pieces.append(delta["partial_json"])
        elif kind == "text_delta":
            item.pieces.append(delta["text"])
            self._emit(out, "response.output_text.delta", **self._where(item), delta=delta["text"], logprobs=[])
        elif kind == "thinking_delta":
            item.pieces.append(delta["thinking"])
            if self._options.summaries:
                self._emit(
                    out,
                    "response.reasoning_summary_text.delta",
                    **self._where(item, "summary"),
                    delta=delta["thinking"],
                )
            else:
                self._emit(out, "response.reasoning_text.delta", **self._where(item), delta=delta["thinking"])
        elif kind == "signature_delta":
            item.signature = delta["signature"]
        elif kind == "citations_delta":
            item.citations.append(delta["citation"])
        elif kind == "input_json_delta" and item.custom_input is not None:
            item.pieces.append(delta["partial_json"])
            text = item.custom_input.feed(delta["partial_json"])
            if text:
                self._emit(out, "response.custom_tool_call_input.delta", **self._where(item, None), delta=text)
        elif kind == "input_json_delta" and delta["partial_json"]:
            item.pieces.append(delta["partial_json"])
            self._emit(
                out,
                "response.function_call_arguments.delta",
                **self._where(item, None),
                delta=delta["partial_json"],
            )

    def _on_block_stop(self, index: int, out: list[Event]) -> None:
        item = self._by_block.pop(index, None)
        if item is None:
            return
        if item.kind is Kind.WEB_SEARCH:
            # The call is complete: the gateway is searching now; its result closes the item.
            self._emit(out, "response.web_search_call.searching", **self._where(item, None))
            return
        if item.kind is Kind.MESSAGE and self._options.check is not None:
            # With `text.format` the text is final only once the whole reply passed the check (the
            # SDK parses it at `output_text.done`): the message closes at the end, or the response fails.
            return
        self._close(item, "completed", out)

    def _on_search_result(self, item: OpenItem, content: Any, out: list[Event]) -> None:
        if not isinstance(content, list):  # the error object: the search failed, the model's turn goes on
            self._close(item, "failed", out)
            return
        item.sources = [result["url"] for result in content if isinstance(result, dict) and result.get("url")]
        self._emit(out, "response.web_search_call.completed", **self._where(item, None))
        self._close(item, "completed", out)

    def _close(self, item: OpenItem, status: shapes.ItemStatus, out: list[Event]) -> None:
        text = item.text
        if item.kind is Kind.MESSAGE:
            annotations = [url_citation(citation, text) for citation in item.citations]
            for number, annotation in enumerate(annotations):
                self._emit(
                    out,
                    "response.output_text.annotation.added",
                    **self._where(item),
                    annotation_index=number,
                    annotation=annotation,
                )
            self._emit(out, "response.output_text.done", **self._where(item), text=text, logprobs=[])
            part = shapes.output_text(text, annotations)
            self._emit(out, "response.content_part.done", **self._where(item), part=part)
        elif item.kind is Kind.REASONING and item.part_open:
            if self._options.summaries:
                where = self._where(item, "summary")
                self._emit(out, "response.reasoning_summary_text.done", **where, text=text)
                self._emit(
                    out, "response.reasoning_summary_part.done", **where, part={"type": "summary_text", "text": text}
                )
            else:
                self._emit(out, "response.reasoning_text.done", **self._where(item), text=text)
                self._emit(
                    out,
                    "response.content_part.done",
                    **self._where(item),
                    part={"type": "reasoning_text", "text": text},
                )
        elif item.kind is Kind.FUNCTION_CALL:
            if not item.pieces:  # a call without input: its arguments are still a JSON object
                item.pieces.append("{}")
                self._emit(out, "response.function_call_arguments.delta", **self._where(item, None), delta="{}")
            self._emit(
                out,
                "response.function_call_arguments.done",
                **self._where(item, None),
                name=item.name.name,
                arguments=text,
            )
        elif item.custom_input is not None:
            rest = item.custom_input.finish(item.text)
            if rest:
                self._emit(out, "response.custom_tool_call_input.delta", **self._where(item, None), delta=rest)
            self._emit(
                out, "response.custom_tool_call_input.done", **self._where(item, None), input=item.custom_input.input
            )
        item.done = item_object(item, self._options, status)
        self._emit(out, "response.output_item.done", output_index=item.output_index, item=item.done)

    # ------------------------------------------------------------------ the end

    def _finish(self, out: list[Event]) -> None:
        reason = _INCOMPLETE.get(self._stop_reason or "end_turn")
        check = self._options.check
        if check is not None and reason is None:
            problem = check.problem("".join(item.text for item in self._items if item.kind is Kind.MESSAGE))
            if problem is not None:
                self._report(f"text.format: {problem}")
                self.refusal = invalid_text_format(problem)
                self._fail(self.refusal.code or "server_error", self.refusal.message, out)
                return
        for item in self._unfinished():  # the messages a `text.format` check held back (a search without result)
            complete = reason is None and item.kind is not Kind.WEB_SEARCH
            self._close(item, "completed" if complete else "incomplete", out)
        self._phase = Phase.FINISHED
        if reason is None:
            self.final = self._response("completed", with_usage=True)
            self._emit(out, "response.completed", response=self.final)
        else:
            self.final = self._response("incomplete", with_usage=True, incomplete_reason=reason)
            self._emit(out, "response.incomplete", response=self.final)

    def _fail(self, code: str, message: str, out: list[Event]) -> None:
        if self._phase is Phase.WAITING:  # failed before message_start: the stream still opens first
            self._emit(out, "response.created", response=self._response("in_progress"))
        for item in self._unfinished():
            item.done = item_object(item, self._options, "incomplete")
        self._phase = Phase.FINISHED
        self._emit(out, "error", code=code, message=message, param=None)
        self.final = self._response("failed", with_usage=True, error=shapes.error_body(code, message))
        self._emit(out, "response.failed", response=self.final)

    def _unfinished(self) -> Iterator[OpenItem]:
        return (item for item in self._items if item.done is None)

    # ------------------------------------------------------------------ shapes

    def _emit(self, out: list[Event], event_type: str, **fields: Any) -> None:
        out.append({"type": event_type, **fields, "sequence_number": self._sequence})
        self._sequence += 1

    @staticmethod
    def _where(item: OpenItem, index_name: str | None = "content") -> dict[str, Any]:
        where: dict[str, Any] = {"item_id": item.item_id, "output_index": item.output_index}
        if index_name == "content":
            where["content_index"] = 0
        elif index_name == "summary":
            where["summary_index"] = 0
        return where

    def _response(
        self,
        status: shapes.ResponseStatus,
        *,
        with_usage: bool = False,
        error: dict[str, Any] | None = None,
        incomplete_reason: str | None = None,
    ) -> dict[str, Any]:
        frame = self._frame
        finished = status != "in_progress"
        output = [item.done for item in self._items if item.done is not None] if finished else []
        return shapes.response(
            response_id=frame.response_id,
            created_at=frame.created_at,
            model=frame.model,
            status=status,
            output=output,
            echo=frame.echo,
            usage=self._openai_usage() if with_usage else None,
            error=error,
            incomplete_reason=incomplete_reason,
            completed_at=int(time.time()) if status == "completed" else None,
        )

    def _openai_usage(self) -> dict[str, Any]:
        usage = self._usage
        cached = usage.get("cache_read_input_tokens", 0)
        written = usage.get("cache_creation_input_tokens", 0)
        output_tokens = usage.get("output_tokens", 0)
        return shapes.usage(
            usage.get("input_tokens", 0) + cached + written,
            output_tokens,
            cached=cached,
            cache_write=written,
            reasoning=reasoning_share(self._items, output_tokens),
        )
