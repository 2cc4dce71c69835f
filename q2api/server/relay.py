"""`POST /v1/messages`: one Claude request relayed through Amazon Q, streamed or aggregated.

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
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
from loguru import logger
from starlette.requests import Request
from starlette.responses import Response

from q2api.amazonq.errors import UpstreamError
from q2api.amazonq.models import DEFAULT_Q_MODEL
from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.message_aggregator import MessageAggregator
from q2api.anthropic.sse import encode_sse, ping_bytes
from q2api.anthropic.token_count import estimate_request_tokens
from q2api.anthropic.types import MessagesRequest, parse_messages_request
from q2api.conversion import debug_summary, guards
from q2api.conversion.converter import Conversion, ConversionOptions, convert_request, session_conversation_id
from q2api.server.disconnects import DisconnectAwareStreamingResponse, unless_client_leaves
from q2api.server.edge import error_response, json_response
from q2api.server.exchange_log import Exchange
from q2api.translation.error_mapping import map_upstream_exception
from q2api.translation.pump import ReplyPump
from q2api.translation.translator import StreamTranslator

# nginx's "client closed request": only ever logged, since nobody is left to receive it.
CLIENT_CLOSED_REQUEST = 499


@dataclass(frozen=True, slots=True)
class Prepared:
    request: MessagesRequest
    conversion: Conversion
    input_tokens: int


def _json_text(document: Any) -> str:
    return orjson.dumps(document).decode()


class MessagesRelay:
    def __init__(self, *, upstream: Any, settings: Any, model_aliases: dict[str, str]) -> None:
        self._upstream = upstream
        self._settings = settings
        self._model_aliases = model_aliases
        self._loop_policy = guards.LoopPolicy(guards.LoopMode(settings.loop_mode), settings.loop_threshold)

    # ------------------------------------------------------------ pure preparation

    def prepare(self, body: bytes, exchange: Exchange) -> Prepared:
        # Lines logged here carry the request id: RequestIdMiddleware put it in the log context.
        request = parse_messages_request(body)
        exchange.model = request.model
        exchange.stream = bool(request.stream)
        loop_findings = guards.check_tool_loops(request, self._loop_policy)
        for finding in loop_findings:
            logger.warning(f"tool loop suspected: {finding.line()}")
        conversion = convert_request(
            request,
            ConversionOptions(
                # One id per Claude Code session keeps Amazon Q's conversation stable across turns.
                conversation_id=session_conversation_id(request) or exchange.request_id,
                model_aliases=self._model_aliases,
                default_model=self._settings.default_model or DEFAULT_Q_MODEL,
            ),
        )
        exchange.upstream_model = conversion.model.q_model_id
        invalid = guards.validate_conversation(conversion.payload)
        for finding in invalid:
            # The converter promises valid output; a finding here is our bug, not the client's.
            logger.error(f"converter produced invalid output: {finding.line()}")
        input_tokens = estimate_request_tokens(request)
        exchange.input_tokens = input_tokens
        if self._settings.debug_message_conversion:
            summary = debug_summary.conversion_summary(len(request.messages), conversion, (*loop_findings, *invalid))
            logger.info("\n" + summary)
            # Reproducers for bug reports, built only when a sink takes DEBUG lines (Q2API_LOG_LEVEL=DEBUG).
            logger.opt(lazy=True).debug(
                "Claude request (redacted): {}",
                lambda: _json_text(debug_summary.redacted_claude_request(orjson.loads(body))),
            )
            logger.opt(lazy=True).debug(
                "Amazon Q request (redacted): {}",
                lambda: _json_text(debug_summary.redacted_payload(conversion.payload)),
            )
        return Prepared(request, conversion, input_tokens)

    # ------------------------------------------------------------ the endpoint

    async def handle(self, request: Request, body: bytes, request_id: str) -> Response:
        exchange = Exchange(request_id=request_id, request_bytes=len(body))
        try:
            prepared = self.prepare(body, exchange)
        except AnthropicError as error:
            return self._finish_with_error(exchange, error)
        # Opening the reply (retries included), the hold and a whole non-streaming
        # answer can each take minutes; a client that leaves meanwhile cancels them,
        # and cancelling is what closes the upstream request.
        response = await unless_client_leaves(request.receive, self._relay(exchange, prepared))
        if response is None:
            exchange.status = CLIENT_CLOSED_REQUEST
            exchange.error = "client_disconnected"
            exchange.log()
            return Response(status_code=CLIENT_CLOSED_REQUEST)  # nobody is left to read it
        return response

    async def _relay(self, exchange: Exchange, prepared: Prepared) -> Response:
        translator = StreamTranslator(
            model=prepared.request.model,
            input_tokens=prepared.input_tokens,
            tool_names=prepared.conversion.tool_names,
            stop_sequences=tuple(prepared.request.stop_sequences or ()),
            max_tokens=prepared.request.max_tokens,
            context_window=prepared.conversion.model.context_window,
            thinking_tags=prepared.request.thinking is not None and prepared.request.thinking.enabled,
        )
        opened = self._upstream.open_stream(prepared.conversion.payload)
        try:
            stream = await opened.__aenter__()
        except Exception as exc:  # UpstreamError subclasses, mapped; anything else is a 500
            exchange.upstream_request_id = getattr(exc, "request_id", None) or "-"
            return self._finish_with_error(exchange, self._map(exc, prepared))
        exchange.upstream_seconds = stream.time_to_headers
        exchange.upstream_request_id = stream.request_id or "-"
        exchange.upstream_attempts = stream.attempts
        pump = ReplyPump(stream.chunks(), translator)

        if not prepared.request.stream:
            try:
                return await self._aggregate(exchange, translator, pump)
            finally:
                opened.close()
        try:
            return await self._stream(exchange, translator, pump, opened)
        except BaseException:
            # The streaming response owns the upstream reply once it exists; until then, we do.
            opened.close()
            raise

    async def _aggregate(self, exchange: Exchange, translator: StreamTranslator, pump: ReplyPump) -> Response:
        aggregator = MessageAggregator()
        aggregator.add_all(translator.start())
        while not pump.finished:
            aggregator.add_all(await pump.read() or ())
        self._record_outcome(exchange, translator)
        if pump.failure is not None:
            return self._finish_with_error(exchange, pump.failure)
        message = aggregator.message()
        response = json_response(message)
        exchange.response_bytes = len(response.body)
        exchange.first_content_seconds = time.perf_counter() - exchange.started
        exchange.log()
        return response

    async def _stream(self, exchange: Exchange, translator: StreamTranslator, pump: ReplyPump, opened: Any) -> Response:
        held = translator.start()
        hold_until = time.perf_counter() + self._settings.stream_hold_seconds
        while not pump.finished and not translator.has_content:
            remaining = hold_until - time.perf_counter()
            if remaining <= 0:
                break
            batch = await pump.read(timeout=remaining)
            if batch:
                held.extend(batch)
        if pump.failure is not None and not translator.has_content:
            # Nothing reached the client yet: a real status lets the SDKs retry.
            opened.close()
            self._record_outcome(exchange, translator)
            return self._finish_with_error(exchange, pump.failure)

        ping_interval = self._settings.ping_interval
        finished = False

        def finish() -> None:
            # Runs once, from the body's clean-up or, if the client left before the
            # body even started, from the response's.
            nonlocal finished
            if finished:
                return
            finished = True
            opened.close()
            self._record_outcome(exchange, translator)
            if pump.failure is not None:
                exchange.error = pump.failure.error_type
            elif not pump.finished:
                exchange.error = "client_disconnected"
            exchange.log()

        async def body() -> AsyncIterator[bytes]:
            try:
                chunk = encode_sse(held)
                exchange.response_bytes += len(chunk)
                if translator.has_content:
                    exchange.first_content_seconds = time.perf_counter() - exchange.started
                yield chunk
                while not pump.finished:
                    batch = await pump.read(timeout=ping_interval)
                    if batch is None:
                        yield ping_bytes()
                        continue
                    if not batch:
                        continue
                    if exchange.first_content_seconds is None and translator.has_content:
                        exchange.first_content_seconds = time.perf_counter() - exchange.started
                    chunk = encode_sse(batch)
                    exchange.response_bytes += len(chunk)
                    yield chunk
            finally:
                finish()

        return DisconnectAwareStreamingResponse(
            body(),
            on_finish=finish,
            media_type="text/event-stream",
            headers={"cache-control": "no-cache"},
        )

    # ------------------------------------------------------------ helpers

    def _map(self, exc: Exception, prepared: Prepared) -> AnthropicError:
        if not isinstance(exc, UpstreamError):
            logger.opt(exception=exc).error("opening the Amazon Q reply failed unexpectedly")
        return map_upstream_exception(
            exc,
            input_tokens=prepared.input_tokens,
            context_window=prepared.conversion.model.context_window,
        )

    @staticmethod
    def _record_outcome(exchange: Exchange, translator: StreamTranslator) -> None:
        exchange.stop_reason = translator.stop_reason
        try:
            exchange.output_tokens = translator.usage.get("output_tokens", 0)
        except Exception:  # a translator fault, already reported by the pump; the log line must still be written
            exchange.output_tokens = 0
        for finding in translator.findings:
            logger.warning(f"reply finding: {finding}")

    def refuse(self, request_id: str, error: AnthropicError) -> Response:
        """Answer a request refused before its body was parsed (bad client key, body too large)."""
        return self._finish_with_error(Exchange(request_id=request_id), error)

    @staticmethod
    def _finish_with_error(exchange: Exchange, error: AnthropicError) -> Response:
        exchange.status = error.status
        exchange.error = error.error_type
        exchange.log()
        return error_response(error, exchange.request_id)
