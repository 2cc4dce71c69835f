"""What one client connection may cost: header size and count, time to send headers and body, idle time.

uvicorn enforces some of this itself (idle keep-alive, concurrency) and is
configured for it by :func:`uvicorn_options`. The rest it leaves open — with
httptools, a header of any size is buffered, a connection that never sends a
request or sends it one byte a second is never timed out, a chunked body that
never ends or a body shorter than its `content-length` holds a request open
for ever — so :class:`LimitedHttpToolsProtocol`, uvicorn's own httptools
protocol with a few checks added, closes those doors:

* header bytes over `max_header_bytes` or more than `max_headers` headers → 431;
* headers not complete within `header_timeout` of the connection opening or the
  request's first byte → 408 (a connection that sent nothing is just closed);
* a body not complete within `body_timeout` of the headers → 408, and the
  application sees the client disconnect;
* more than `max_connections` open connections → 503 on the newest, saying what to raise.

`max_connections` 0 (the default) is derived from the process's open-file limit
(`connection_cap`): each stream holds two sockets, the client's and Amazon Q's.

Refusals are in the Anthropic error envelope and close the connection. The
limits travel on the application (`app.state.transport_limits`, set by
`create_app`), so every `--workers` process and every in-process test gateway
enforces its own settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import resource
from typing import Any

import orjson
from loguru import logger
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from q2api.anthropic.errors import error_envelope
from q2api.settings import Settings

PROTOCOL_PATH = "q2api.server.transport:LimitedHttpToolsProtocol"
# Set in the request's state when its body timed out, so the edge logs the 408 the client got.
BODY_TIMED_OUT = "body_timed_out"
# How long a refused connection is still read (and the bytes dropped) before it is closed.
_LINGER_SECONDS = 1.0
# A stream holds two sockets: the client's and the one to Amazon Q.
FILES_PER_STREAM = 2
# Files a worker keeps open besides its streams: the listening socket, the store, logs, token
# and catalogue calls, the interpreter's own.
FILES_KEPT = 64
# The most `raise_open_file_limit` asks for, whatever the hard limit (some systems say "unlimited").
_OPEN_FILES_WANTED = 1 << 20
# What a Responses WebSocket message may carry besides the body Q2API_MAX_BODY_BYTES lets through
# (its `type`, `stream_id`, `generate`): a bigger message is closed by the server (1009), a body
# over the limit in a message under it gets the 413 a POST gets (q2api.server.responses_websocket).
WEBSOCKET_ENVELOPE_BYTES = 4096


@dataclasses.dataclass(frozen=True)
class TransportLimits:
    """The transport settings (defaults and meaning in q2api.settings and docs/configuration.md)."""

    max_header_bytes: int
    max_headers: int
    header_timeout: float
    body_timeout: float
    keep_alive_timeout: int
    max_connections: int
    max_body_bytes: int


def transport_limits(settings: Settings) -> TransportLimits:
    return TransportLimits(
        max_header_bytes=settings.max_header_bytes,
        max_headers=settings.max_headers,
        header_timeout=settings.header_timeout,
        body_timeout=settings.body_timeout,
        keep_alive_timeout=settings.keep_alive_timeout,
        max_connections=settings.max_connections or connection_cap(open_file_limit()),
        max_body_bytes=settings.max_body_bytes,
    )


def open_file_limit() -> int:
    """This process's soft limit on open files (`ulimit -n`); "unlimited" counts as a large number."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _OPEN_FILES_WANTED if soft == resource.RLIM_INFINITY else soft


def connection_cap(open_files: int) -> int:
    """The connections a worker with `open_files` can hold streaming, with FILES_KEPT files to spare."""
    return max((open_files - FILES_KEPT) // FILES_PER_STREAM, 1)


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard one (capped), as servers do; returns the new soft
    limit. Worker processes inherit it. A refusal (a sandbox) keeps the limit there is."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = _OPEN_FILES_WANTED if hard == resource.RLIM_INFINITY else min(hard, _OPEN_FILES_WANTED)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return open_file_limit()


def connection_cap_line(settings: Settings) -> str:
    """The start-up line that says how many connections each worker takes, and where that comes from."""
    if settings.max_connections:
        return f"connection cap: {settings.max_connections} per worker (Q2API_MAX_CONNECTIONS)"
    files = open_file_limit()
    return (
        f"connection cap: {connection_cap(files)} per worker, from the open-file limit of {files} "
        f"({FILES_PER_STREAM} per stream, {FILES_KEPT} kept; Q2API_MAX_CONNECTIONS sets it)"
    )


def uvicorn_options(limits: TransportLimits) -> dict[str, Any]:
    """The uvicorn.Config / uvicorn.run arguments that enforce what uvicorn can enforce itself."""
    return {
        "http": PROTOCOL_PATH,
        "timeout_keep_alive": limits.keep_alive_timeout,
        # Requests in progress (streams whose client left included) per worker. One above the cap:
        # uvicorn refuses a request once connections >= its limit, which would turn away the cap's
        # own last connection (in plain text); the protocol below refuses the one beyond the cap.
        "limit_concurrency": limits.max_connections + 1,
        # Only read by the h11 protocol, should it ever be chosen instead.
        "h11_max_incomplete_event_size": limits.max_header_bytes,
        # A Responses WebSocket message is a request body (uvicorn's default is 16 MiB whatever the setting).
        "ws_max_size": limits.max_body_bytes + WEBSOCKET_ENVELOPE_BYTES,
    }


class _Refused(Exception):
    """Raised inside a parser callback to stop parsing a request that broke a limit.

    httptools turns it into the parser error uvicorn catches and answers through `send_400_response`.
    """


def _limits_of(app: object) -> TransportLimits:
    """The limits the q2api app carries, found through whatever uvicorn wrapped around it."""
    for _ in range(10):
        limits = getattr(getattr(app, "state", None), "transport_limits", None)
        if isinstance(limits, TransportLimits):
            return limits
        app = getattr(app, "app", None)
    return transport_limits(Settings())  # not the q2api app: the defaults


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header, timing and connection limits."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = _limits_of(self.app)
        self._awaiting_headers = True  # between requests, or inside a request's header block
        self._header_bytes = 0
        self._header_count = 0
        self._parsed_header_bytes = 0  # the request line and headers parsed so far, counted as they arrive
        self._timer: asyncio.TimerHandle | None = None
        self._refusal: tuple[int, str] | None = None
        self._discarding = False  # refused: what the client still sends is read and dropped

    # -- connection ---------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            cap = self.limits.max_connections
            logger.warning(
                f"connection refused: {cap} connections are open already, the cap per worker; "
                "raise Q2API_MAX_CONNECTIONS (with `ulimit -n`) or --workers for more"
            )
            self._send_refusal(
                503,
                f"the gateway has too many open connections ({cap} per worker); try again shortly. "
                "Its operator can raise Q2API_MAX_CONNECTIONS (and the open-file limit, `ulimit -n`) or add --workers",
            )
            return
        self._start_timer(self.limits.header_timeout, self._headers_too_slow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._discarding:
            return
        if self._awaiting_headers:
            self._header_bytes += len(data)
        super().data_received(data)
        # Checked after parsing, so a chunk that completes the headers and carries body bytes is never
        # counted against them; what httptools may buffer is bounded by the limit plus one read.
        if self._awaiting_headers and self._header_bytes > self.limits.max_header_bytes:
            self._send_refusal(431, f"request headers exceed the gateway limit of {self.limits.max_header_bytes} bytes")

    def send_400_response(self, msg: str) -> None:
        # uvicorn answers every parser error with a 400; a limit stopped this parse: answer that instead.
        if self._refusal is not None:
            self._send_refusal(*self._refusal)
        else:
            super().send_400_response(msg)

    # -- parser callbacks ----------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._awaiting_headers = True
        self._header_count = 0
        self._parsed_header_bytes = 0
        if self._timer is None:  # a request on a kept-alive connection: its headers are timed from here
            self._start_timer(self.limits.header_timeout, self._headers_too_slow)

    def on_url(self, url: bytes) -> None:
        self._count_header_bytes(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            self._refusal = (431, f"more than {self.limits.max_headers} request headers")
            raise _Refused
        self._count_header_bytes(len(name) + len(value) + 4)  # `: ` and CRLF
        super().on_header(name, value)

    def _count_header_bytes(self, size: int) -> None:
        # The count of `data_received` misses a header block that arrives whole in one read (its end
        # resets the count before the check): the parsed sizes catch that one too.
        self._parsed_header_bytes += size
        if self._parsed_header_bytes > self.limits.max_header_bytes:
            self._refusal = (431, f"request headers exceed the gateway limit of {self.limits.max_header_bytes} bytes")
            raise _Refused

    def on_headers_complete(self) -> None:
        self._awaiting_headers = False
        self._header_bytes = 0
        self._start_timer(self.limits.body_timeout, self._body_too_slow)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._cancel_timer()
        super().on_message_complete()

    # -- timers ---------------------------------------------------------------

    def _start_timer(self, seconds: float, callback: Any) -> None:
        self._cancel_timer()
        if math.isfinite(seconds):
            self._timer = self.loop.call_later(seconds, callback)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _headers_too_slow(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if self._header_bytes == 0 and (self.cycle is None or self.cycle.response_complete):
            self.transport.close()  # an idle connection that never sent (another) request
            return
        self._send_refusal(408, f"the request headers did not arrive within {self.limits.header_timeout:g} s")

    def _body_too_slow(self) -> None:
        self._timer = None
        cycle = self.cycle
        if self.transport.is_closing() or cycle is None:
            return
        if not cycle.response_started:
            self._send_refusal(408, f"the request body did not arrive within {self.limits.body_timeout:g} s")
        else:
            self.transport.close()
        # The application, waiting for the rest of the body, sees the client leave, and why.
        cycle.scope["state"][BODY_TIMED_OUT] = True
        cycle.disconnected = True
        cycle.message_event.set()

    # -- refusals -------------------------------------------------------------

    def _send_refusal(self, status: int, message: str) -> None:
        self._cancel_timer()
        if self.transport.is_closing() or self._discarding:
            return
        error_type = {408: "timeout_error", 431: "invalid_request_error", 503: "overloaded_error"}.get(
            status, "invalid_request_error"
        )
        body = orjson.dumps(error_envelope(error_type, message))
        head = [
            STATUS_LINE[status],
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        # Lingering close: closing with the client's unread bytes still queued would reset the
        # connection and could destroy the answer before the client reads it. Shut our side,
        # discard what still comes for a moment, then close.
        self._discarding = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(_LINGER_SECONDS, self.transport.close)
        if status != 503:
            logger.bind(status=status).warning(f"connection closed: {message}")
