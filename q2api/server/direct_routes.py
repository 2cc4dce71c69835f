"""The front doors' POST routes, served straight from the server instead of through Starlette's stack.

A streamed reply writes once per upstream read, and its task wakes up at
least once per write. Through Starlette each write passes three send wrappers
(the error middleware's, the request-id middleware's, the exception handler's)
and each wake-up resumes the ten coroutine frames between uvicorn and the
stream; served directly, neither happens. In bench/profile_gateway.py `paced`
the three wrappers were on the stack in 25 %, 18 % and 13 % of the gateway's busy
samples; served directly, a relayed chunk costs 122 Python calls instead of 149.

Served directly means the same contract as every other route: a request id in
the log context and the `request-id` header, a gateway bug answered with the
500 envelope of the door, and every other method or path (405, 404, the
trailing-slash redirect) left to Starlette.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from loguru import logger
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from q2api.anthropic.errors import AnthropicError
from q2api.server import metrics
from q2api.server.edge import (
    REQUEST_ID_HEADER,
    DoorErrorResponse,
    answer_gateway_bug,
    begin_request,
    log_gateway_bug,
)

Handler = Callable[[Request], Awaitable[Response]]


class DirectRoutesApp(Starlette):
    """Starlette, except that the `direct` routes skip its middleware and router.

    Their handlers write their request's log line themselves (q2api.server.exchange_log).
    """

    def __init__(
        self, *, direct: Mapping[tuple[str, str], Handler], error_response_for: DoorErrorResponse, **options: Any
    ) -> None:
        super().__init__(**options)
        self._direct = dict(direct)  # (method, path) → handler
        self._error_response_for = error_response_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = self._direct.get((scope["method"], scope["path"])) if scope["type"] == "http" else None
        if handler is None:
            await super().__call__(scope, receive, send)
            return
        started = time.perf_counter()
        scope["app"] = self
        request_id = begin_request(scope)
        with logger.contextualize(request_id=request_id):
            try:
                response = await handler(Request(scope, receive, send))
            except AnthropicError as error:  # what Starlette's exception handler would have answered
                response = self._error_response_for(scope["path"], error, request_id)
            except Exception as exc:
                # The relay never reached its own log line: this is the request's line.
                await answer_gateway_bug(exc, scope, receive, send, self._error_response_for, request_id)
                logger.bind(status=500).info(f"{scope['method']} {scope['path']}")
                metrics.observe_request(
                    route=scope["path"], model=metrics.NO_MODEL, status=500, seconds=time.perf_counter() - started
                )
                return
            if REQUEST_ID_HEADER not in response.headers:
                response.headers[REQUEST_ID_HEADER] = request_id
            try:
                await response(scope, receive, send)
            except Exception as exc:
                # The relay's responses send their status line before anything that could fail,
                # so the response has started: uvicorn closes the unfinished connection.
                log_gateway_bug(exc, scope["method"], scope["path"])
