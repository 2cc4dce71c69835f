"""One request's reply from Amazon Q, as the one object the endpoint talks to.

`Reply` owns the opened upstream reply, the pump that decodes and translates
it, and the exchange record that becomes the request's log line. It closes
the upstream reply in exactly one place (`close`), whichever way the request
ends — finished, failed, or abandoned by the client — and writes the log line
then, once.

A reply may take more than one upstream call. When the model calls the web
search the request offered (q2api.conversion.web_search), the call ends with
the translator awaiting its server tools: the reply runs the searches (the
`WebSearcher`, on the account that served the call), shows the client
`server_tool_use` + `web_search_tool_result` blocks, and goes on with the next
upstream call — the model's turn continued with the results — in the same
Claude message. A call that also asked for client tools ends the message with
`tool_use`; after MAX_UPSTREAM_CALLS calls it ends with `pause_turn` (Anthropic's
own server-tool loop stops the same way), and the client may send it back to go
on. Claude Code's WebSearch requests (`ReplyPlan.first_search`) start with the
search itself.

A reply that must match a schema (`ReplyPlan.check`: structured outputs, strict tools, the
OpenAI doors' `response_format`) is held until it ends and judged
(q2api.translation.held_reply): released as it is, or asked for once more (one repair call,
q2api.conversion.repair_turn, its content replacing what the client never saw), or failed.
The client gets pings meanwhile.

A reply that compacts the conversation (`ReplyPlan.compaction`,
q2api.frontdoors.claude.compaction) starts with an upstream call of its own that asks for the
summary, read whole; the client gets it as a `compaction` block, then either the message ends
(`stop_reason: compaction`) or goes on with the call that continues from the summary.

Opening a call, Amazon Q may refuse a thinking signature of the history
(`THINKING_SIGNATURE_INVALID`, docs/protocol.md#native-thinking: signatures are bound to the
account that made them). The call is made once more without the history's
reasoning (logged at WARNING), never failed for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from loguru import logger

from q2api.amazonq.attempts import UpstreamTrace
from q2api.amazonq.errors import UpstreamError, UpstreamHTTPError, is_signature_refusal
from q2api.amazonq.turn_affinity import TurnAffinity
from q2api.amazonq.types import GenerateAssistantResponseRequest
from q2api.amazonq.upstream import OpenedReply, UpstreamStream
from q2api.amazonq.web_search import SearchError, SearchOutcome
from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.events import (
    ContextManagement,
    IterationUsage,
    StreamEvent,
    WebSearchResult,
    WebSearchToolResultError,
    error_event,
)
from q2api.anthropic.reply_content import ReplyCheck, reply_content
from q2api.conversion.native_thinking import signed_reasoning, without_reasoning
from q2api.conversion.repair_turn import repaired_payload
from q2api.conversion.web_search import (
    MAX_QUERY_CHARS,
    SearchRound,
    WebSearchOptions,
    continued_after_search,
    search_result_text,
)
from q2api.server.lifecycle.exchange_log import Exchange
from q2api.server.lifecycle.off_loop import run_off_loop
from q2api.translation.error_mapping import internal_failure, map_upstream_exception
from q2api.translation.held_reply import Failed, HeldReply, Repair
from q2api.translation.pump import ReplyPump
from q2api.translation.server_tools import ServerToolCall, new_call, page_age, web_search_error, web_search_results
from q2api.translation.translator import StreamTranslator

# Upstream calls one reply may make (Anthropic stops its server-tool loop after 10 iterations).
MAX_UPSTREAM_CALLS = 10
# While a checked reply is held, a ping at least this often keeps the client's connection alive.
HOLD_PING_SECONDS = 5.0


class UpstreamOpener(Protocol):
    """What the reply needs of the upstream client (q2api.amazonq.upstream.UpstreamClient)."""

    def open_stream(
        self,
        payload: GenerateAssistantResponseRequest,
        trace: UpstreamTrace | None = None,
        affinity: TurnAffinity | None = None,
    ) -> OpenedReply: ...


class WebSearcher(Protocol):
    """What the reply needs to search (q2api.amazonq.web_search.WebSearchClient)."""

    async def search(self, query: str, *, account_id: str | None, model: str | None = None) -> SearchOutcome: ...


@dataclass(frozen=True, slots=True)
class ReplyPlan:
    """What the translator and the upstream call need to know of one converted request."""

    payload: GenerateAssistantResponseRequest  # the Amazon Q request body
    model: str  # as the client named it: the reply carries it back
    input_tokens: int
    context_window: int
    tool_names: Mapping[str, str]  # Amazon Q tool name → the client's
    tool_use_ids: Mapping[str, str] = field(default_factory=dict)  # Amazon Q tool-use id → the client's
    stop_sequences: tuple[str, ...] = ()
    max_tokens: int | None = None
    max_reply_bytes: int | None = None  # the reply's bound in bytes, beside max_tokens (Q2API_MAX_REPLY_BYTES)
    thinking_tags: bool = False
    web_search: WebSearchOptions | None = None  # the request offered Anthropic's web search
    first_search: str | None = None  # a request that only asks for this search (Claude Code's WebSearch)
    check: ReplyCheck | None = None  # what the reply must be, judged before the client sees it
    context_management: ContextManagement | None = None  # what context editing did, for the message_delta
    compaction: CompactionPlan | None = None  # the reply starts by summarising the conversation


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """The summarising call of a reply that compacts, and what comes after it."""

    summary_payload: GenerateAssistantResponseRequest  # the conversation and the instruction to summarise it
    summary_estimate: int  # its input tokens, estimated
    pause: bool  # the reply ends with the `compaction` block
    # The call that goes on from the summary (its body and estimated input); the summary's text in.
    continued: Callable[[str], tuple[GenerateAssistantResponseRequest, int]]
    # The summary's text out of the summarising call's reply (None: it wrote none).
    summary_of: Callable[[str], str | None]


class Reply:
    def __init__(
        self,
        exchange: Exchange,
        upstream: UpstreamOpener,
        plan: ReplyPlan,
        translator: StreamTranslator,
        searcher: WebSearcher | None,
        trace: UpstreamTrace,
    ) -> None:
        self.exchange = exchange
        self._trace = trace  # every call to Amazon Q this reply makes, for the log line and a capture
        self._upstream = upstream
        self._plan = plan
        self._payload = plan.payload
        self._translator = translator
        self._searcher = searcher
        self._opened: OpenedReply | None = None
        self._pump: ReplyPump | None = None
        self._account_id: str | None = None
        self._calls = 0  # upstream calls opened
        self._searches = 0  # searches run (max_uses)
        self._call_output = _CallOutput()  # what the current upstream call said (for its continuation)
        # The server-tool step between two upstream calls, and the events it has written so far:
        # each block goes out as soon as it exists (a search's `server_tool_use` before the search).
        self._tools_work: asyncio.Task[None] | None = None
        self._tool_events: list[StreamEvent] = []
        self._tool_events_ready = asyncio.Event()
        self._upstream_started_at: float | None = None  # when the first call to Amazon Q began
        self._closed = False
        self._held = HeldReply(plan.check) if plan.check is not None else None
        self._check_failure: AnthropicError | None = None  # the reply failed its check after its repair turn
        self._released_content = False  # a held reply's content has gone to the client
        self._quiet_since = time.monotonic()  # a held reply's last output (events or a ping)
        self._compaction_pending = plan.compaction is not None

    @classmethod
    async def open(
        cls,
        upstream: UpstreamOpener,
        plan: ReplyPlan,
        exchange: Exchange,
        trace: UpstreamTrace | None = None,
        *,
        searcher: WebSearcher | None = None,
    ) -> Reply:
        """Open the upstream reply (retries included); a failure is raised as the client's AnthropicError.

        `trace` gets a record of every call to Amazon Q (and, if it keeps bodies, the last body sent).
        A plan with a `first_search` opens nothing yet: its first read runs the search."""
        translator = StreamTranslator(
            model=plan.model,
            input_tokens=plan.input_tokens,
            tool_names=plan.tool_names,
            tool_use_ids=plan.tool_use_ids,
            stop_sequences=plan.stop_sequences,
            max_tokens=plan.max_tokens,
            max_reply_bytes=plan.max_reply_bytes,
            context_window=plan.context_window,
            thinking_tags=plan.thinking_tags,
            server_tools={"web_search": "web_search"} if plan.web_search is not None else None,
        )
        translator.context_management = plan.context_management
        reply = cls(exchange, upstream, plan, translator, searcher, trace if trace is not None else UpstreamTrace())
        if plan.first_search is None and plan.compaction is None:
            await reply._open_call(plan.payload)
        return reply

    async def _open_call(self, payload: GenerateAssistantResponseRequest) -> None:
        """Open the next upstream call and read from it; raises the client's AnthropicError."""
        self._calls += 1
        if self._opened is not None:
            # The previous call, read to its end, is closed first: its account's in-flight slot (and its
            # connection) is free for this one, so a turn never holds two slots of one account at once.
            self._opened.close()
            self._opened = None
        if self._pump is not None:
            self._pump.close()  # and its read timer with it
        started = time.monotonic()
        try:
            opened, stream = await self._open_stream(payload)
        except Exception as exc:
            self.exchange.record_upstream(getattr(exc, "request_id", None), self._trace, time.monotonic() - started)
            if not isinstance(exc, UpstreamError):
                logger.opt(exception=exc).error("opening the Amazon Q reply failed unexpectedly")
            raise map_upstream_exception(
                exc, input_tokens=self._plan.input_tokens, context_window=self._plan.context_window
            ) from None
        self._opened = opened
        self._pump = ReplyPump(stream.chunks(), self._translator, stream.buffered)
        self._account_id = stream.account_id
        if self._upstream_started_at is None:
            self._upstream_started_at = stream.upstream_started_at
        self._call_output = _CallOutput()
        self.exchange.record_upstream(
            stream.request_id, self._trace, stream.time_to_headers, stream.account_label, stream.account_id
        )

    async def _open_stream(self, payload: GenerateAssistantResponseRequest) -> tuple[OpenedReply, UpstreamStream]:
        opened = self._upstream.open_stream(payload, self._trace)
        try:
            return opened, await opened.__aenter__()
        except UpstreamHTTPError as error:
            retry = without_reasoning(dict(payload)) if is_signature_refusal(error) else None
            if retry is None:
                raise
            logger.bind(upstream_request_id=error.request_id).warning(
                "thinking signature refused by Amazon Q (THINKING_SIGNATURE_INVALID): "
                "sending the request once more without the history's reasoning"
            )
        self._payload = cast(GenerateAssistantResponseRequest, retry)
        opened = self._upstream.open_stream(self._payload, self._trace)
        return opened, await opened.__aenter__()

    # ------------------------------------------------------------------ reading

    def start(self) -> list[StreamEvent]:
        events = self._translator.start()
        if self._plan.first_search is not None and self._calls == 0 and not self._translator.server_calls:
            self._translator.expect_server_calls([new_call("web_search", {"query": self._plan.first_search})])
        return events

    async def read(self, timeout: float | None = None) -> list[StreamEvent] | None:
        """The next batch of events, or None if `timeout` passed first (nothing is lost)."""
        events = await self._read(timeout)
        held = self._held
        if held is None or events is None:
            return events
        ends = any(event["type"] in ("message_delta", "error") for event in events)
        # The check runs once the reply ended, off the loop: its cost is the client's schema's.
        verdict = await run_off_loop(held.take, events) if ends else held.take(events)
        if isinstance(verdict, Repair):
            self._repair(verdict)
            return self._quiet()
        if isinstance(verdict, Failed):
            self._check_failure = verdict.error
            logger.warning(f"reply check: still wrong after its repair turn: {verdict.error.message}")
            return [error_event(verdict.error.error_type, verdict.error.message)]
        if not verdict:
            return self._quiet()
        self._quiet_since = time.monotonic()
        self._released_content = self._released_content or any(e["type"] == "content_block_start" for e in verdict)
        return verdict

    def _quiet(self) -> list[StreamEvent] | None:
        """Nothing to send while the reply is held: [] — or None (the client gets a ping) now and then."""
        now = time.monotonic()
        if now - self._quiet_since < HOLD_PING_SECONDS:
            return []
        self._quiet_since = now
        return None

    def _repair(self, repair: Repair) -> None:
        logger.warning(f"reply check: {repair.problem}; asking the model once more")
        self._payload = repaired_payload(self._payload, repair.content, repair.prompt)
        self._translator = self._translator.rewound(self._plan.input_tokens)
        self._tools_work = asyncio.ensure_future(self._open_next_call())

    async def _open_next_call(self) -> None:
        try:
            await self._open_call(self._payload)
        except AnthropicError as error:
            self._emit(self._translator.fail(error))

    async def _read(self, timeout: float | None) -> list[StreamEvent] | None:
        if self._tools_work is None and self._compaction_pending:
            self._compaction_pending = False
            self._tools_work = asyncio.ensure_future(self._compact())
        if self._tools_work is None and self._translator.awaiting_tools:
            self._tools_work = asyncio.ensure_future(self._run_server_tools())
        work = self._tools_work
        if work is not None:
            if not self._tool_events and not work.done():
                ready = asyncio.ensure_future(self._tool_events_ready.wait())
                try:
                    await asyncio.wait({work, ready}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    ready.cancel()
            written, self._tool_events = self._tool_events, []
            self._tool_events_ready.clear()
            if work.done():
                self._tools_work = None
                fault = work.exception()
                if fault is not None:  # a bug of ours: the reply ends with an error event, as in the pump
                    logger.opt(exception=fault).error("running the reply's server tools failed")
                    written += self._translator.fail(internal_failure())
            elif not written:
                return None  # `timeout` passed first
            return written
        assert self._pump is not None, "a reply without a call reads only its searches"
        events = await self._pump.read(timeout)
        if (
            self.exchange.upstream_first_content_seconds is None
            and self._translator.has_content
            and self._upstream_started_at is not None
        ):
            self.exchange.record_upstream_content(time.monotonic() - self._upstream_started_at)
        if events and self._plan.web_search is not None:
            self._call_output.note(events)
        return events

    @property
    def finished(self) -> bool:
        if self._tools_work is not None or self._translator.awaiting_tools or self._compaction_pending:
            return False
        if self._held is not None and self._held.holding:
            return False
        return self._translator.finished or (self._pump is not None and self._pump.finished)

    @property
    def failure(self) -> AnthropicError | None:
        if self._check_failure is not None:
            return self._check_failure
        if self._pump is not None and self._pump.failure is not None:
            return self._pump.failure
        return self._translator.failure

    @property
    def has_content(self) -> bool:
        """A content block went out (or will): the reply is committed, an HTTP error status is no longer possible."""
        if self._held is not None:
            return self._released_content
        return self._translator.has_content

    def sent(self, size: int) -> None:
        """`size` bytes of this reply went to the client."""
        self.exchange.record_sent(size, with_content=self._translator.has_content)

    # ------------------------------------------------------------------ server tools

    def _emit(self, events: list[StreamEvent]) -> None:
        self._tool_events += events
        self._tool_events_ready.set()

    async def _run_server_tools(self) -> None:
        translator = self._translator
        calls = list(translator.server_calls)
        answers: list[tuple[str, bool]] = []
        for call in calls:
            self._emit(translator.server_tool_use(call))
            content, text, failed, searched = await self._search(call)
            self._emit(translator.web_search_result(call, content, searched=searched))
            answers.append((text, failed))
        if translator.tools_emitted:
            self._emit(translator.end("tool_use"))  # the client's tools come first: its turn
            return
        if self._calls >= MAX_UPSTREAM_CALLS:
            logger.warning(f"web search: {self._calls} upstream calls in one reply, pausing the turn")
            self._emit(translator.end("pause_turn"))
            return
        output = self._call_output
        done = SearchRound(
            text=output.text,
            reasoning=signed_reasoning(output.thinking, output.signature) if output.thinking else None,
            calls=tuple((call.upstream_id, call.input) for call in calls),
            results=tuple(answers),
        )
        self._payload = continued_after_search(self._payload, done)
        translator.resume(self._plan.input_tokens + sum(len(text) for text, _ in answers) // 4)
        try:
            await self._open_call(self._payload)
        except AnthropicError as error:
            self._emit(translator.fail(error))

    async def _search(
        self, call: ServerToolCall
    ) -> tuple[list[WebSearchResult] | WebSearchToolResultError, str, bool, bool]:
        """(result block content, the text the model reads, failed, a search was run) of one call."""
        options = self._plan.web_search
        query = call.input.get("query")
        if not isinstance(query, str) or not query.strip():
            return _failed(SearchError.INVALID_TOOL_INPUT, "the search needs a non-empty `query`")
        if len(query) > MAX_QUERY_CHARS:
            return _failed(SearchError.QUERY_TOO_LONG, f"the query is longer than {MAX_QUERY_CHARS} characters")
        if options is not None and options.max_uses is not None and self._searches >= options.max_uses:
            return _failed(
                SearchError.MAX_USES_EXCEEDED,
                f"the limit of {options.max_uses} searches for this request is reached; answer with what you found",
            )
        if self._searcher is None:
            return _failed(SearchError.UNAVAILABLE, "web search is not available")
        self._searches += 1
        model = self._payload["conversationState"]["currentMessage"]["userInputMessage"].get("modelId")
        outcome = await self._searcher.search(query, account_id=self._account_id, model=model)
        if outcome.results is None:
            return _failed(outcome.error or SearchError.UNAVAILABLE, "the web search is unavailable right now")
        results = [result for result in outcome.results if options is None or options.allows(result.url)]
        content = web_search_results([(result.title, result.url, result.published_ms) for result in results])
        text = search_result_text(query, [(r.title, r.url, r.snippet, page_age(r.published_ms)) for r in results])
        return content, text, False, True

    # ------------------------------------------------------------------ compaction

    async def _compact(self) -> None:
        plan = self._plan.compaction
        assert plan is not None
        translator = self._translator
        payload = self._payload
        try:
            summary = await self._summarise(plan)
        except AnthropicError as error:
            self._emit(translator.fail(error))
            return
        self._emit(translator.compaction(summary))
        if plan.pause:
            self._emit(translator.end("compaction"))
            return
        if summary is not None:
            payload, estimate = plan.continued(summary)
            translator.estimate_input(estimate)
        else:
            logger.warning("compaction: the model wrote no summary; the reply goes on without compacting")
        self._payload = payload
        await self._open_next_call()

    async def _summarise(self, plan: CompactionPlan) -> str | None:
        """The summarising call, read whole by a translator of its own; its usage and credits go to the reply's."""
        reader = StreamTranslator(
            model=self._plan.model, input_tokens=plan.summary_estimate, context_window=self._plan.context_window
        )
        self._calls += 1
        started = time.monotonic()
        try:
            opened = self._upstream.open_stream(plan.summary_payload, self._trace)
            stream = await opened.__aenter__()
        except Exception as exc:
            self.exchange.record_upstream(getattr(exc, "request_id", None), self._trace, time.monotonic() - started)
            if not isinstance(exc, UpstreamError):
                logger.opt(exception=exc).error("opening the Amazon Q summary call failed unexpectedly")
            raise map_upstream_exception(
                exc, input_tokens=plan.summary_estimate, context_window=self._plan.context_window
            ) from None
        self._account_id = stream.account_id
        self.exchange.record_upstream(
            stream.request_id, self._trace, stream.time_to_headers, stream.account_label, stream.account_id
        )
        pump = ReplyPump(stream.chunks(), reader, stream.buffered)
        events: list[StreamEvent] = []
        try:
            while not pump.finished:
                events += await pump.read() or ()
        finally:
            pump.close()
            opened.close()
        if pump.failure is not None:
            raise pump.failure
        usage = reader.usage
        iteration: IterationUsage = {
            "type": "compaction",
            "input_tokens": usage.get("input_tokens", 0),
            "output_tokens": usage.get("output_tokens", 0),
            "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
            "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
        }
        self._translator.iterations = [iteration]
        self._translator.add_credits(reader.credits)
        return plan.summary_of(reply_content(events).text)

    # ------------------------------------------------------------------ the end

    def close(self, *, error: AnthropicError | None = None, abandoned: str | None = None) -> None:
        """Close the upstream reply and write the log line; idempotent.

        `error`: the request ends with this error status (nothing was streamed);
        `abandoned`: the client left or stopped reading (`client_disconnected`,
        `client_stalled`) before the reply finished.
        """
        if self._closed:
            return
        self._closed = True
        if self._tools_work is not None:
            self._tools_work.cancel()
        if self._opened is not None:
            self._opened.close()
        if self._pump is not None:
            self._pump.close()
        translator = self._translator
        for finding in translator.findings:
            logger.warning(f"reply finding: {finding}")
        outcome = self.exchange
        try:
            usage = translator.usage
            output_tokens = usage.get("output_tokens", 0)
            outcome.cache_read_tokens = usage.get("cache_read_input_tokens") or 0
            outcome.cache_write_tokens = usage.get("cache_creation_input_tokens") or 0
        except Exception:  # a translator fault, already reported by the pump; the line must still be written
            output_tokens = 0
        outcome.record_reply(translator.stop_reason, output_tokens, translator.credits)
        failure = error or self.failure
        if abandoned is not None and not self.finished:
            outcome.end(CLIENT_CLOSED_REQUEST, abandoned)
        elif error is not None:
            outcome.end(error.status, error.error_type, error.message)
        else:
            outcome.end(200, failure.error_type if failure is not None else None)


class _CallOutput:
    """The assistant's text and thinking of one upstream call, read off the events the client gets."""

    __slots__ = ("_texts", "_thinking", "signature")

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._thinking: list[str] = []
        self.signature: str | None = None

    def note(self, events: list[StreamEvent]) -> None:
        for event in events:
            if event["type"] != "content_block_delta":
                continue
            delta: Any = event["delta"]
            kind = delta["type"]
            if kind == "text_delta":
                self._texts.append(delta["text"])
            elif kind == "thinking_delta":
                self._thinking.append(delta["thinking"])
            elif kind == "signature_delta" and self.signature is None:
                self.signature = delta["signature"]

    @property
    def text(self) -> str:
        return "".join(self._texts)

    @property
    def thinking(self) -> str:
        return "".join(self._thinking)


def _failed(error: SearchError, why: str) -> tuple[WebSearchToolResultError, str, bool, bool]:
    return web_search_error(error.value), f"The web search failed ({error.value}): {why}.", True, False


# nginx's "client closed request": only ever logged, since nobody is left to receive it.
CLIENT_CLOSED_REQUEST = 499
