"""One request's reply from Amazon Q, as the one object the endpoint talks to.

`Reply` owns the opened upstream reply, the pump that decodes and translates
it, and the exchange record that becomes the request's log line. It closes
the upstream reply in exactly one place (`close`), whichever way the request
ends — finished, failed, or abandoned by the client — and writes the log line
then, once.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from loguru import logger

from q2api.amazonq.attempts import UpstreamTrace
from q2api.amazonq.errors import UpstreamError
from q2api.amazonq.types import GenerateAssistantResponseRequest
from q2api.amazonq.upstream import OpenedReply, UpstreamStream
from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.events import StreamEvent
from q2api.server.exchange_log import Exchange
from q2api.translation.error_mapping import map_upstream_exception
from q2api.translation.pump import ReplyPump
from q2api.translation.translator import StreamTranslator


class UpstreamOpener(Protocol):
    """What the reply needs of the upstream client (q2api.amazonq.upstream.UpstreamClient)."""

    def open_stream(
        self, payload: GenerateAssistantResponseRequest, trace: UpstreamTrace | None = None
    ) -> OpenedReply: ...


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
    thinking_tags: bool = False


class Reply:
    def __init__(
        self,
        exchange: Exchange,
        opened: OpenedReply,
        stream: UpstreamStream,
        translator: StreamTranslator,
        trace: UpstreamTrace,
    ) -> None:
        self.exchange = exchange
        self._opened = opened
        self._translator = translator
        self._pump = ReplyPump(stream.chunks(), translator, stream.buffered)
        self._closed = False
        self._upstream_started_at = stream.upstream_started_at
        exchange.record_upstream(stream.request_id, trace, stream.time_to_headers, stream.account_label)

    @classmethod
    async def open(
        cls, upstream: UpstreamOpener, plan: ReplyPlan, exchange: Exchange, trace: UpstreamTrace | None = None
    ) -> Reply:
        """Open the upstream reply (retries included); a failure is raised as the client's AnthropicError.
        `trace` gets a record of every call to Amazon Q (and, if it keeps bodies, the last body sent)."""
        trace = trace if trace is not None else UpstreamTrace()
        translator = StreamTranslator(
            model=plan.model,
            input_tokens=plan.input_tokens,
            tool_names=plan.tool_names,
            tool_use_ids=plan.tool_use_ids,
            stop_sequences=plan.stop_sequences,
            max_tokens=plan.max_tokens,
            context_window=plan.context_window,
            thinking_tags=plan.thinking_tags,
        )
        opened = upstream.open_stream(plan.payload, trace)
        started = time.monotonic()
        try:
            stream = await opened.__aenter__()
        except Exception as exc:
            exchange.record_upstream(getattr(exc, "request_id", None), trace, time.monotonic() - started)
            if not isinstance(exc, UpstreamError):
                logger.opt(exception=exc).error("opening the Amazon Q reply failed unexpectedly")
            raise map_upstream_exception(
                exc, input_tokens=plan.input_tokens, context_window=plan.context_window
            ) from None
        return cls(exchange, opened, stream, translator, trace)

    # ------------------------------------------------------------------ reading

    def start(self) -> list[StreamEvent]:
        return self._translator.start()

    async def read(self, timeout: float | None = None) -> list[StreamEvent] | None:
        """The next batch of events, or None if `timeout` passed first (nothing is lost)."""
        batch = await self._pump.read(timeout)
        if self.exchange.upstream_first_content_seconds is None and self._translator.has_content:
            self.exchange.record_upstream_content(time.monotonic() - self._upstream_started_at)
        return batch

    @property
    def finished(self) -> bool:
        return self._pump.finished

    @property
    def failure(self) -> AnthropicError | None:
        return self._pump.failure

    @property
    def has_content(self) -> bool:
        """A content block exists: the reply is committed, an HTTP error status is no longer possible."""
        return self._translator.has_content

    def sent(self, size: int) -> None:
        """`size` bytes of this reply went to the client."""
        self.exchange.record_sent(size, with_content=self._translator.has_content)

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
        self._opened.close()
        self._pump.close()
        translator = self._translator
        for finding in translator.findings:
            logger.warning(f"reply finding: {finding}")
        try:
            output_tokens = translator.usage.get("output_tokens", 0)
        except Exception:  # a translator fault, already reported by the pump; the line must still be written
            output_tokens = 0
        outcome = self.exchange
        outcome.record_reply(translator.stop_reason, output_tokens)
        failure = error or self._pump.failure
        if abandoned is not None and not self._pump.finished:
            outcome.end(CLIENT_CLOSED_REQUEST, abandoned)
        elif error is not None:
            outcome.end(error.status, error.error_type, error.message)
        else:
            outcome.end(200, failure.error_type if failure is not None else None)


# nginx's "client closed request": only ever logged, since nobody is left to receive it.
CLIENT_CLOSED_REQUEST = 499
