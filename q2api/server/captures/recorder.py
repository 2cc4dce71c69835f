"""Per request: whether to write a capture, and writing it off the event loop.

`Q2API_CAPTURE` decides:

- `failures` (the default): a request Amazon Q refused as malformed — a 4xx other than the
  account's own (a rejected token, access denied, throttling, quotas) and other than a context
  overflow, which Claude Code answers by compacting — and a request on which the loop guard or
  the order guard found something;
- `all`: every request that reached the conversion;
- `off`: none.

The recorder holds references to what the capture is made of (the client's body, the
conversion, the upstream trace with the exact body sent) and lets go of them as soon as it knows
none will be needed — once Amazon Q has opened its reply and nothing went wrong — so a stream in
progress holds nothing more than it did. When the request ends (its log line is about to be
written), a capture, if any, is named in the line (`capture=<id>`) and in the admin activity, and
written by a worker thread; the capture counter of `/metrics` counts it by reason.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime
import time
from collections.abc import Iterable

from loguru import logger

from q2api.amazonq.attempts import UpstreamTrace
from q2api.amazonq.errors import FailureKind, UpstreamHTTPError
from q2api.conversion.claude_converter import ConversionOptions
from q2api.conversion.pipeline import GuardedConversion
from q2api.frontdoors.door import FrontDoor
from q2api.server import metrics
from q2api.server.captures.document import CaptureMaterial, capture_document
from q2api.server.captures.redaction import safe_headers
from q2api.server.captures.store import CaptureStore, capture_id
from q2api.server.lifecycle.exchange_log import Exchange
from q2api.server.wiring import loop_policy, trim_policy
from q2api.settings import CaptureMode, Settings

REASON_UPSTREAM_REJECTED = "upstream_rejected"
REASON_TOOL_LOOP = "tool_loop"
REASON_ORDER_GUARD = "order_guard"
REASON_ALL = "all"


class Captures:
    """The gateway's capture writer: settings, the store, and the writes under way."""

    def __init__(self, settings: Settings, store: CaptureStore | None = None) -> None:
        self.mode = settings.capture
        self.redact_text = settings.capture_redact_text
        self.store = store or CaptureStore(settings.capture_dir)
        self._settings = settings
        self.loop_policy = loop_policy(settings)  # what a capture records the conversion ran with
        self.trim_policy = trim_policy(settings)
        self._writing: set[asyncio.Future[None]] = set()

    def recorder(
        self, request_id: str, door: FrontDoor, body: bytes, headers: Iterable[tuple[str, str]]
    ) -> CaptureRecorder | None:
        if self.mode is CaptureMode.OFF:
            return None
        return CaptureRecorder(self, request_id, door, body, safe_headers(headers))

    def submit(self, material: CaptureMaterial) -> None:
        context = contextvars.copy_context()  # the request id of what the writing logs
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            context.run(self._write, material)
            return
        future = loop.run_in_executor(None, context.run, self._write, material)
        self._writing.add(future)
        future.add_done_callback(self._writing.discard)

    async def drain(self) -> None:
        """Wait for the captures being written (at shutdown; tests)."""
        while self._writing:
            await asyncio.gather(*list(self._writing), return_exceptions=True)

    def _write(self, material: CaptureMaterial) -> None:
        try:
            data = capture_document(material, self._settings, redact_text=self.redact_text)
            self.store.write(material.capture_id, data)
            metrics.count_capture(material.reasons[0])
        except Exception as exc:  # a full disk must not become the request's problem
            logger.opt(exception=exc).warning(
                f"capture {material.capture_id} could not be written to {self.store.directory}: {exc}"
            )


class CaptureRecorder:
    """One request's material for a capture, kept only while a capture may still be written."""

    def __init__(
        self, captures: Captures, request_id: str, door: FrontDoor, body: bytes, headers: dict[str, str]
    ) -> None:
        self._captures = captures
        self._request_id = request_id
        self._door = door
        self._body: bytes | None = body
        self._headers = headers
        self._guarded: GuardedConversion | None = None
        self._options: ConversionOptions | None = None
        self._message_count: int | None = None
        self.trace = UpstreamTrace(keep_body=True)
        self._released = False

    def prepared(self, guarded: GuardedConversion, options: ConversionOptions, message_count: int) -> None:
        self._guarded, self._options, self._message_count = guarded, options, message_count

    def opened(self) -> None:
        """Amazon Q opened its reply: with nothing found so far, no capture can be needed any more."""
        if self._captures.mode is CaptureMode.FAILURES and not self._reasons():
            self._release()

    def finish(self, exchange: Exchange) -> None:
        """The request is over (`Exchange.on_ending`): name and write its capture, if it gets one."""
        try:
            self._finish(exchange)
        except Exception as exc:  # a capture must never cost the request its log line
            logger.opt(exception=exc).error("capturing the request failed")
            self._release()

    def _finish(self, exchange: Exchange) -> None:
        reasons = self._reasons()
        if not reasons and self._captures.mode is CaptureMode.ALL and self._body is not None:
            reasons = [REASON_ALL]
        if not reasons or self._released or self._body is None:
            self._release()
            return
        now = datetime.datetime.now(datetime.UTC)
        exchange.capture = capture_id(self._request_id, now)
        total = time.perf_counter() - exchange.started
        material = CaptureMaterial(
            capture_id=exchange.capture,
            captured_at=now,
            reasons=tuple(reasons),
            request_id=self._request_id,
            door=self._door,
            client_headers=self._headers,
            client_body=self._body,
            model=exchange.model,
            upstream_model=exchange.upstream_model,
            options=self._options,
            loop_policy=self._captures.loop_policy,
            trim_policy=self._captures.trim_policy,
            claude_message_count=self._message_count,
            guarded=self._guarded,
            trace=self.trace,
            client_status=exchange.status,
            client_error_type=exchange.error,
            client_message=exchange.error_message,
            timings={
                "prepare_ms": exchange.prepare_seconds,
                "upstream_ms": exchange.upstream_seconds,
                "upstream_first_content_ms": exchange.upstream_first_content_seconds,
                "ttft_ms": exchange.first_content_seconds,
                "total_ms": total,
            },
        )
        self._released, self._body, self._guarded = True, None, None  # the material has them now
        self._captures.submit(material)

    def _reasons(self) -> list[str]:
        reasons = []
        if _rejected_as_malformed(self.trace.failure):
            reasons.append(REASON_UPSTREAM_REJECTED)
        guarded = self._guarded
        if guarded is not None and guarded.invalid:
            reasons.append(REASON_ORDER_GUARD)
        if guarded is not None and guarded.loop_findings:
            reasons.append(REASON_TOOL_LOOP)
        return reasons

    def _release(self) -> None:
        self._released = True
        self._body = None
        self._guarded = None
        self.trace.forget_body()


def _rejected_as_malformed(failure: BaseException | None) -> bool:
    """An Amazon Q 4xx about the request itself (not the account, not the conversation's length)."""
    return (
        isinstance(failure, UpstreamHTTPError)
        and 400 <= failure.status < 500
        and failure.kind is FailureKind.BAD_REQUEST
    )
