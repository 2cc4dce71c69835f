"""The one INFO line each relayed request writes (`POST /v1/messages`, `POST /v1/chat/completions`):
what was asked, what came back, how long it took.

The same moment feeds the request metrics (q2api.server.metrics), so the log and `/metrics` never disagree.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from loguru import logger

from q2api.server import metrics


@dataclass(slots=True)
class Exchange:
    """What one request did, filled in as it happens, logged once by `end`."""

    request_id: str
    request_bytes: int = 0
    route: str = "/v1/messages"  # the front door it came in by
    started: float = field(default_factory=time.perf_counter)
    model: str = "-"
    upstream_model: str = "-"
    stream: bool = False
    input_tokens: int = 0
    status: int = 200
    upstream_request_id: str = "-"
    upstream_attempts: int = 0  # calls to Amazon Q, retries and account switches included
    upstream_seconds: float | None = None
    first_content_seconds: float | None = None
    response_bytes: int = 0
    stop_reason: str | None = None
    output_tokens: int = 0
    error: str | None = None
    account: str = "-"  # the label of the account that served it, when one did
    account_id: str | None = None
    # The credits Amazon Q metered for the reply (its `meteringEvent`s, docs/protocol.md#prompt-caching-and-metering), and whether
    # it metered any: a reply without a metering event has `credits` 0.0 and `credits_metered` False,
    # which is "unknown", not "free". A usage ledger reads both.
    credits: float = 0.0
    credits_metered: bool = False
    # Told about the finished request right after its line is written (the admin API's activity ring).
    on_logged: Callable[[Exchange], None] | None = None
    ended: bool = False

    def record_request(self, model: str, *, stream: bool) -> None:
        self.model = model
        self.stream = stream

    def record_conversion(self, upstream_model: str, input_tokens: int) -> None:
        self.upstream_model = upstream_model
        self.input_tokens = input_tokens

    def record_upstream(
        self,
        request_id: str | None,
        attempts: int | None,
        seconds: float | None,
        account: str | None = None,
        account_id: str | None = None,
    ) -> None:
        self.upstream_request_id = request_id or "-"
        if account is not None:
            self.account = account
        if account_id is not None:
            self.account_id = account_id
        if attempts is not None:
            self.upstream_attempts = attempts
        self.upstream_seconds = seconds

    def record_sent(self, size: int, *, with_content: bool) -> None:
        self.response_bytes += size
        if with_content and self.first_content_seconds is None:
            self.first_content_seconds = time.perf_counter() - self.started

    def record_reply(self, stop_reason: str | None, output_tokens: int, credits: float | None = None) -> None:
        self.stop_reason = stop_reason
        self.output_tokens = output_tokens
        if credits is not None:
            self.credits = credits
            self.credits_metered = True

    def end(self, status: int, error: str | None = None) -> None:
        """The request is over: write its line (once, however many ways it ends)."""
        if self.ended:
            return
        self.ended = True
        self.status = status
        self.error = error
        self.log()

    def log(self) -> None:
        def ms(seconds: float | None) -> str:
            return "-" if seconds is None else f"{seconds * 1000:.1f}"

        total_seconds = time.perf_counter() - self.started
        metrics.observe_request(
            route=self.route,
            model=self.upstream_model,
            status=self.status,
            seconds=total_seconds,
            first_content_seconds=self.first_content_seconds,
        )
        if self.credits_metered:
            metrics.observe_credits(
                account_id=self.account_id, account=self.account, model=self.upstream_model, credits=self.credits
            )

        logger.bind(
            request_id=self.request_id,
            model=self.model,
            upstream_model=self.upstream_model,
            stream=self.stream,
            request_bytes=self.request_bytes,
            input_tokens=self.input_tokens,
            status=self.status,
            upstream_request_id=self.upstream_request_id,
            upstream_attempts=self.upstream_attempts,
            upstream_ms=ms(self.upstream_seconds),
            ttft_ms=ms(self.first_content_seconds),
            total_ms=ms(total_seconds),
            response_bytes=self.response_bytes,
            stop_reason=self.stop_reason or "-",
            output_tokens=self.output_tokens,
            credits=_credits_field(self.credits) if self.credits_metered else "-",
        ).info(f"POST {self.route}" + (f" error={self.error}" if self.error else ""))
        if self.on_logged is not None:
            self.on_logged(self)


def _credits_field(credits: float) -> str:
    """Credits as the log shows them: Amazon Q meters to 0.01 (docs/protocol.md#prompt-caching-and-metering); a few more digits
    keep the sum of several calls exact without printing float noise."""
    return f"{credits:.6f}".rstrip("0").rstrip(".") if credits else "0"
