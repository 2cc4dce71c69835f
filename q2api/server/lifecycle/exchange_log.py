"""The one INFO line each relayed request writes (`POST /v1/messages`, `POST /v1/chat/completions`,
`POST /v1/responses`):
what was asked, what came back, how long it took, and where the time went:

    prepare_ms                  arrival → the Amazon Q request ready (parse, guards, conversion)
    upstream_ms                 first call to Amazon Q → its response headers (retries included)
    upstream_first_content_ms   first call to Amazon Q → the first content of its reply
    ttft_ms                     arrival → the first content reaching the client
    total_ms                    arrival → the last byte

A slow upstream shows in `upstream_ms` / `upstream_first_content_ms`; a slow gateway in
`prepare_ms`, or in `ttft_ms` well above `prepare_ms + upstream_first_content_ms`.
`upstream_attempts` counts every call to Amazon Q, `upstream_hosts` names the host of each, and
`upstream_host` the one that served the reply (`-` when none did).

The same moment feeds the request metrics (q2api.server.metrics), so the log and `/metrics` never disagree.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from loguru import logger

from q2api.amazonq.attempts import UpstreamTrace
from q2api.server import metrics
from q2api.tenants.gate import Admission


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
    upstream_attempts: int = 0  # calls to Amazon Q, retries, account switches and refresh repeats included
    upstream_hosts: tuple[str, ...] = ()  # the host of each of those calls
    upstream_host: str = "-"  # the host whose 200 reply was relayed
    prepare_seconds: float | None = None
    upstream_seconds: float | None = None  # to the upstream's response headers (or its final refusal)
    upstream_first_content_seconds: float | None = None
    first_content_seconds: float | None = None
    response_bytes: int = 0
    stop_reason: str | None = None
    output_tokens: int = 0
    error: str | None = None
    error_message: str | None = None
    account: str = "-"  # the label of the account that served it, when one did
    key_label: str | None = None  # the label of the store key it came with (never the key itself)
    admission: Admission | None = None  # what its store key was counted for, settled once it is over
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    account_id: str | None = None
    capture: str | None = None  # the id of the capture file written for it (q2api.server.captures)
    # Told that the request is over just before its line is written (a capture is decided there).
    on_ending: Callable[[Exchange], None] | None = None
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
        self.prepare_seconds = time.perf_counter() - self.started

    def record_upstream(
        self,
        request_id: str | None,
        trace: UpstreamTrace,
        seconds: float | None,
        account: str | None = None,
        account_id: str | None = None,
    ) -> None:
        """The upstream reply opened, or failed to (`seconds`: until its headers, or its final refusal)."""
        self.upstream_request_id = request_id or "-"
        if account is not None:
            self.account = account
        if account_id is not None:
            self.account_id = account_id
        self.upstream_attempts = len(trace.attempts)
        self.upstream_hosts = tuple(trace.hosts)
        served = [attempt.host for attempt in trace.attempts if attempt.outcome == "ok"]
        self.upstream_host = served[-1] if served else "-"
        self.upstream_seconds = seconds

    def record_upstream_content(self, seconds: float) -> None:
        """The upstream reply's first content arrived, `seconds` after the first call to Amazon Q."""
        if self.upstream_first_content_seconds is None:
            self.upstream_first_content_seconds = seconds

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

    def end(self, status: int, error: str | None = None, message: str | None = None) -> None:
        """The request is over: write its line (once, however many ways it ends). `message`: what
        the client was told, for a capture (never logged: it may quote the client's input)."""
        if self.ended:
            return
        self.ended = True
        self.status = status
        self.error = error
        self.error_message = message
        if self.on_ending is not None:
            self.on_ending(self)
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
            prepare_seconds=self.prepare_seconds,
            upstream_headers_seconds=self.upstream_seconds,
            upstream_first_content_seconds=self.upstream_first_content_seconds,
        )
        fields: dict[str, object] = {}
        if self.capture is not None:
            fields["capture"] = self.capture
        if self.key_label is not None:
            fields["key"] = self.key_label
        if self.account_id is not None:
            metrics.observe_cache_reads(account_id=self.account_id, account=self.account, tokens=self.cache_read_tokens)
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
            upstream_hosts=",".join(self.upstream_hosts) or "-",
            upstream_host=self.upstream_host,
            prepare_ms=ms(self.prepare_seconds),
            upstream_ms=ms(self.upstream_seconds),
            upstream_first_content_ms=ms(self.upstream_first_content_seconds),
            ttft_ms=ms(self.first_content_seconds),
            total_ms=ms(total_seconds),
            response_bytes=self.response_bytes,
            stop_reason=self.stop_reason or "-",
            output_tokens=self.output_tokens,
            credits=_credits_field(self.credits) if self.credits_metered else "-",
            **fields,
        ).info(f"POST {self.route}" + (f" error={self.error}" if self.error else ""))
        if self.on_logged is not None:
            self.on_logged(self)


def _credits_field(credits: float) -> str:
    """Credits as the log shows them: Amazon Q meters to 0.01 (docs/protocol.md#prompt-caching-and-metering); a few more digits
    keep the sum of several calls exact without printing float noise."""
    return f"{credits:.6f}".rstrip("0").rstrip(".") if credits else "0"
