"""One request relayed through Amazon Q, streamed or aggregated, whichever front door it came in by.

`POST /v1/messages` (the Claude door), `POST /v1/chat/completions` (OpenAI Chat Completions) and
`POST /v1/responses` (the OpenAI Responses API) share everything below: the door only reads the
body into a Claude request and renders the reply (q2api.frontdoors; each door with its routes and
hooks is declared once in q2api.server.doors, which hands the relay a body, never a Starlette request).

The order of work is the order of failure modes:

1. parse and validate (400 naming the field), loop guard, conversion, output
   validation — all pure, all before any upstream traffic;
2. open the upstream reply; failures here (HTTP errors after retries,
   timeouts, dead tokens) are real HTTP statuses;
3. hold the client's response until the first content event (or a short
   hold time) so that an exception frame that arrives before any content is
   still a real HTTP status, which the SDKs retry — an in-stream `error`
   event is never retried;
4. stream: one SSE chunk per upstream read, pings while the upstream is
   silent, and a closed block + `error` event if the reply breaks.

A client that leaves at any step after parsing cancels the work, and
cancelling is what closes the upstream request.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from loguru import logger
from starlette.responses import Response
from starlette.types import Receive

from q2api.accounts.session_affinity import SessionAffinity, TurnKey
from q2api.amazonq.types import GenerateAssistantResponseRequest
from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.message_aggregator import MessageAggregator
from q2api.anthropic.token_count import estimate_request_tokens
from q2api.anthropic.types import MessagesRequest
from q2api.conversion.cache_points import with_cache_points
from q2api.conversion.checkpoints import CheckpointStore
from q2api.conversion.claude_converter import Conversion, ConversionOptions, session_conversation_id
from q2api.conversion.pipeline import convert_guarded
from q2api.conversion.web_search import requested_search
from q2api.frontdoors.claude import CLAUDE_DOOR
from q2api.frontdoors.door import DoorCall, FrontDoor
from q2api.frontdoors.session_key import session_key
from q2api.models.routing import UPSTREAM_MODEL_HEADER, ModelRouter, clamp_max_tokens, with_variant
from q2api.server.captures.recorder import CaptureRecorder, Captures
from q2api.server.edge import error_response, json_response
from q2api.server.lifecycle.compaction_plan import compaction_plan
from q2api.server.lifecycle.conversion_log import log_conversion, log_loop_findings
from q2api.server.lifecycle.disconnects import unless_client_leaves
from q2api.server.lifecycle.exchange_log import Exchange
from q2api.server.lifecycle.off_loop import run_off_loop
from q2api.server.lifecycle.pinned_opener import PinnedOpener
from q2api.server.lifecycle.reply import CLIENT_CLOSED_REQUEST, Reply, ReplyPlan, UpstreamOpener, WebSearcher
from q2api.server.lifecycle.sink import Sink, write_whole
from q2api.server.lifecycle.streaming import ReplyStream
from q2api.server.lifecycle.tenancy import Caller, Tenancy
from q2api.server.wiring import loop_policy, trim_policy
from q2api.settings import Settings

# Bodies larger than this are parsed and converted off the event loop, so that no stream waits for
# another's body: a 1 MB Claude Code turn holds the loop ~3 ms (four arriving together, 12 ms), a
# 30 MiB one ~0.5 s. A 200 KB turn (~1 ms) stays on the loop, where a thread hop would cost more
# than it saves (bench/bench_big_turns.py, section loop).
OFF_LOOP_BODY_BYTES = 256 << 10
# The requests whose conversion checkpoints a relay keeps (q2api.conversion.checkpoints). A
# checkpoint holds ~1.8x its request in memory; 4 MiB of requests is ~20 Claude Code sessions of
# 200 KB in ~7 MB. They pay their way: a 1 MB Claude Code turn costs the gateway ~20 % more CPU
# without them (BENCHMARKS.md, "Optimisations").
CONVERSION_CHECKPOINT_BYTES = 4 << 20
# A door with state's `after` hook for one request (q2api.server.doors): awaited with the call its
# door read and the finished answer (the JSON body a non-streaming request gets; for a stream, its
# encoder's `answer()`) once the reply has succeeded, before its last byte is sent — the Responses
# door stores the response there, so that a client continuing it at once finds it.
After = Callable[[DoorCall, object], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Prepared:
    call: DoorCall
    request: MessagesRequest
    conversion: Conversion
    input_tokens: int
    payload: GenerateAssistantResponseRequest  # the conversion's body, with cache points where asked
    options: ConversionOptions


class MessagesRelay:
    def __init__(
        self,
        *,
        upstream: UpstreamOpener,
        settings: Settings,
        models: ModelRouter,
        on_exchange_logged: Callable[[Exchange], None] | None = None,
        captures: Captures | None = None,
        searcher: WebSearcher | None = None,
        checkpoints: CheckpointStore | None = None,
        tenancy: Tenancy | None = None,
        affinity: SessionAffinity | None = None,
    ) -> None:
        """`on_exchange_logged` is told about each request once its log line is written; `captures`
        writes the capture files of failed requests; `searcher` runs the web searches of requests
        that offer Anthropic's web search tool; `checkpoints` keeps where each recent conversation's
        conversion stood, so that the history a client resends on every turn is converted once
        (default: a store of CONVERSION_CHECKPOINT_BYTES); `affinity` pins each conversation to the
        account that served its last turn (None: every turn goes where the pool sends it)."""
        self.checkpoints = checkpoints if checkpoints is not None else CheckpointStore(CONVERSION_CHECKPOINT_BYTES)
        self._upstream = upstream
        self._searcher = searcher
        self._on_exchange_logged = on_exchange_logged
        self._settings = settings
        self._models = models
        self._loop_policy = loop_policy(settings)
        self._trim_policy = trim_policy(settings)
        self._captures = captures
        self._tenancy = tenancy
        self._affinity = affinity
        self.requests_received = 0  # a running count: the worker is idle while it stands still

    # ------------------------------------------------------------ pure preparation

    def prepare(self, call: DoorCall, exchange: Exchange, recorder: CaptureRecorder | None = None) -> Prepared:
        # Lines logged here carry the request id: RequestIdMiddleware put it in the log context.
        request = call.request
        exchange.record_request(request.model, stream=bool(request.stream))
        resolution = self._models.resolve(request.model)
        model = resolution.choice
        request = with_variant(clamp_max_tokens(request, model), resolution.variant)
        # One id per Claude Code session keeps Amazon Q's conversation stable across turns.
        session = session_conversation_id(request)
        resume = self.checkpoints.find(session, request.messages) if session else None
        options = ConversionOptions(conversation_id=session or exchange.request_id, model=model)
        guarded = convert_guarded(request, options, self._loop_policy, self._trim_policy, resume)
        if recorder is not None:
            recorder.prepared(guarded, options, len(request.messages))
        # In block mode too: the reason is in the log before the 400.
        log_loop_findings(guarded.loop_findings, self._loop_policy.mode)
        for finding in guarded.invalid:
            # The converter promises valid output; a finding here is a case it does not repair. Refused
            # (the refusal below), never sent: a WARNING, as any refused request of a client would be.
            logger.warning(f"converter produced invalid output, refused: {finding.line()}")
        if guarded.refusal is not None:
            raise guarded.refusal
        conversion, invalid = guarded.conversion, guarded.invalid
        assert conversion is not None  # converted unless refused
        if session and conversion.checkpoint is not None:
            checked = resume.checked if resume else None  # the history entries the guard has already read
            checkpoint = (
                conversion.checkpoint
                if invalid or guarded.trimmed
                else conversion.checkpoint.checked_in(conversion.payload, checked)
            )
            self.checkpoints.keep(session, checkpoint, exchange.request_bytes, replacing=resume)
        log_conversion(
            call.claude_document,
            len(request.messages),
            conversion,
            (*guarded.loop_findings, *invalid),
            debug=self._settings.debug_message_conversion,
        )
        input_tokens = estimate_request_tokens(request)
        exchange.record_conversion(conversion.model.q_model_id, input_tokens)
        payload = conversion.payload
        if self._settings.prompt_cache == "auto" and conversion.model.prompt_cache:
            payload = with_cache_points(conversion, request, call.cache_breakpoints())
        return Prepared(call, request, conversion, input_tokens, payload, options)

    def _read_and_prepare(
        self, door: FrontDoor, body: bytes, exchange: Exchange, recorder: CaptureRecorder | None
    ) -> tuple[DoorCall, Prepared | AnthropicError]:
        """The door's reading of the body (its refusal raised: there is no call yet), then `prepare`;
        a refusal of the prepared request is returned with the call, which words it for its client."""
        call = door.read(body)
        try:
            return call, self.prepare(call, exchange, recorder)
        except AnthropicError as error:
            return call, error

    # ------------------------------------------------------------ the endpoint

    async def handle(
        self,
        body: bytes,
        request_id: str,
        door: FrontDoor = CLAUDE_DOOR,
        *,
        disconnected: Receive,
        sink: Sink,
        headers: Iterable[tuple[str, str]] = (),
        after: After | None = None,
        caller: Caller | None = None,
    ) -> None:
        """One request's body, read by `door`, relayed and answered into `sink` (its status, headers
        and body: q2api.server.lifecycle.sink). `disconnected` is the connection's ASGI `receive`
        (its `http.disconnect` cancels the work: q2api.server.lifecycle.disconnects, and ends a
        stream); `headers` are the request's, for its capture file; `after` is the door's `after`
        hook for this request (q2api.server.doors), awaited once the reply succeeded, before its
        last byte."""
        answer = await self._answer(body, request_id, door, disconnected, headers, after, caller)
        if isinstance(answer, ReplyStream):
            await answer.into(sink, disconnected)
        else:
            await write_whole(sink, answer)

    async def _answer(
        self,
        body: bytes,
        request_id: str,
        door: FrontDoor,
        disconnected: Receive,
        headers: Iterable[tuple[str, str]],
        after: After | None,
        caller: Caller | None,
    ) -> Response:
        """The answer to one request: a whole response, or the stream to play into the sink."""
        self.requests_received += 1
        exchange = self._exchange(request_id, door, request_bytes=len(body))
        exchange.key_label = caller.label if caller is not None else None
        recorder = self._captures.recorder(request_id, door, body, headers) if self._captures else None
        if recorder is not None:
            exchange.on_ending = recorder.finish
        call: DoorCall | None = None
        try:
            if len(body) > OFF_LOOP_BODY_BYTES:
                # Pure work on a large body, off the loop (one hop for both steps): its size does not
                # show up as every other stream's latency.
                call, prepared = await run_off_loop(self._read_and_prepare, door, body, exchange, recorder)
            else:
                call, prepared = self._read_and_prepare(door, body, exchange, recorder)
            if isinstance(prepared, AnthropicError):
                raise prepared
            if caller is not None and self._tenancy is not None:
                # The key's models, rates, concurrency and budgets: checked before any upstream call.
                exchange.admission = await self._tenancy.admit(
                    caller, prepared.call.request.model, prepared.input_tokens
                )
        except AnthropicError as error:
            return self._finish_with_error(exchange, door, call.client_error(error) if call else error)
        # Opening the reply (retries included), the hold and a whole non-streaming
        # answer can each take minutes; a client that leaves meanwhile cancels them,
        # and cancelling is what closes the upstream request.
        upstream = self._opener_for(headers, prepared)
        if isinstance(upstream, PinnedOpener):
            after = _pinned_first(upstream, after)
        response = await unless_client_leaves(
            disconnected, self._respond(exchange, prepared, door, recorder, after, upstream)
        )
        if response is None:
            exchange.end(CLIENT_CLOSED_REQUEST, "client_disconnected")
            return Response(status_code=CLIENT_CLOSED_REQUEST)  # nobody is left to read it
        # Never a silent swap: every reply names the model that answered it.
        response.headers[UPSTREAM_MODEL_HEADER] = prepared.conversion.model.q_model_id
        if exchange.admission is not None:
            response.headers.update(exchange.admission.headers)  # the key's rate-limit headers
        return response

    async def _respond(
        self,
        exchange: Exchange,
        prepared: Prepared,
        door: FrontDoor,
        recorder: CaptureRecorder | None,
        after: After | None,
        upstream: UpstreamOpener,
    ) -> Response:
        request, call = prepared.request, prepared.call
        plan = ReplyPlan(
            payload=prepared.payload,
            model=request.model,
            input_tokens=prepared.input_tokens,
            context_window=prepared.conversion.model.context_window,
            tool_names=prepared.conversion.tool_names,
            tool_use_ids=prepared.conversion.tool_use_ids,
            stop_sequences=tuple(request.stop_sequences or ()),
            max_tokens=request.max_tokens,
            max_reply_bytes=self._settings.max_reply_bytes,
            # Also for a model that reasons natively (its reasoning comes in frames of its own): one
            # that still writes tags gets them split, by the same rules as any other.
            thinking_tags=request.thinking is not None and request.thinking.enabled,
            web_search=prepared.conversion.web_search,
            first_search=requested_search(request, prepared.conversion.web_search),
            check=call.reply_check,
            context_management=call.context_management,
            compaction=compaction_plan(prepared.request, call.compaction, prepared.options),
        )
        try:
            reply = await Reply.open(
                upstream, plan, exchange, recorder.trace if recorder else None, searcher=self._searcher
            )
        except AnthropicError as error:
            return self._finish_with_error(exchange, door, call.client_error(error))
        if recorder is not None:
            recorder.opened()
        try:
            if request.stream:
                return await self._stream(reply, call, door, after)
            return await self._aggregate(reply, call, door, after)
        except BaseException:
            # Cancelled (the client left) or a bug: the reply is closed here; a returned
            # stream closes it itself when it ends.
            reply.close(abandoned="client_disconnected")
            raise

    async def _aggregate(self, reply: Reply, call: DoorCall, door: FrontDoor, after: After | None) -> Response:
        aggregator = MessageAggregator()
        aggregator.add_all(reply.start())
        while not reply.finished:
            aggregator.add_all(await reply.read() or ())
        try:
            if reply.failure is not None:
                # The reply's own error, not the one rebuilt from its `error` event: that one
                # keeps only the type, and loses the status (502, 504) and headers (retry-after).
                raise reply.failure
            # Raises a 500 for an unfinished reply, or the door's refusal of the message.
            message = aggregator.message()
            answer = await run_off_loop(call.answer, message) if call.checks_reply else call.answer(message)
        except AnthropicError as error:
            error = call.client_error(error)
            reply.close(error=error)
            return error_response(error, reply.exchange.request_id, door)
        if after is not None:
            await after(call, answer)
        response = json_response(answer)
        reply.sent(len(response.body))
        reply.close()
        return response

    async def _stream(self, reply: Reply, call: DoorCall, door: FrontDoor, after: After | None) -> Response:
        held = reply.start()
        hold_until = time.perf_counter() + self._settings.stream_hold_seconds
        while not reply.finished and not reply.has_content:
            remaining = hold_until - time.perf_counter()
            if remaining <= 0:
                break
            batch = await reply.read(timeout=remaining)
            if batch:
                held.extend(batch)
        failure = reply.failure
        if failure is not None and not reply.has_content:
            # Nothing reached the client yet: a real status lets the SDKs retry.
            failure = call.client_error(failure)
            reply.close(error=failure)
            return error_response(failure, reply.exchange.request_id, door)
        return ReplyStream(
            reply,
            held,
            call.encoder(),
            ping_interval=self._settings.ping_interval,
            send_timeout=self._settings.send_timeout,
            after=(lambda answer: after(call, answer)) if after is not None else None,
            end_off_loop=call.checks_reply,
        )

    # ------------------------------------------------------------ helpers

    def _opener_for(self, headers: Iterable[tuple[str, str]], prepared: Prepared) -> UpstreamOpener:
        """The upstream as this turn sees it: pinned to its conversation's account, with affinity on."""
        if self._affinity is None:
            return self._upstream
        request, door_session = prepared.request, prepared.call.session

        def key() -> TurnKey:  # worked out only when the account choice asks (never with one account)
            found = session_key({name.lower(): value for name, value in headers}, request, door_session)
            return TurnKey(found.digest, held=not found.first_turn)

        return PinnedOpener(self._upstream, self._affinity.turn(key))

    def refuse(
        self, request_id: str, error: AnthropicError, door: FrontDoor = CLAUDE_DOOR, caller: Caller | None = None
    ) -> Response:
        """Answer a request refused before its body was parsed (bad client key, body too large)."""
        exchange = self._exchange(request_id, door)
        exchange.key_label = caller.label if caller is not None else None
        return self._finish_with_error(exchange, door, error)

    def _exchange(self, request_id: str, door: FrontDoor, request_bytes: int = 0) -> Exchange:
        return Exchange(
            request_id=request_id, request_bytes=request_bytes, route=door.route, on_logged=self._on_exchange_logged
        )

    @staticmethod
    def _finish_with_error(exchange: Exchange, door: FrontDoor, error: AnthropicError) -> Response:
        exchange.end(error.status, error.error_type, error.message)
        return error_response(error, exchange.request_id, door)


def _pinned_first(opener: PinnedOpener, after: After | None) -> After:
    """`after`, once the turn's pin is written: the client's next turn may come the moment it has the
    last byte, to another worker or replica."""

    async def finish(call: DoorCall, answer: object) -> None:
        await opener.settled()
        if after is not None:
            await after(call, answer)

    return finish
