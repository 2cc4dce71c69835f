"""Where the request lifecycle writes its answer: a sink the shell provides.

The relay never returns a Starlette response: it writes the status, the headers and the body chunks
into a `Sink` — over HTTP the ASGI `send` (`AsgiSink`, which the shell's `SinkResponse` wraps,
q2api.server.edge), over the Responses WebSocket one message per line, in tests a list — so its
behaviour is tested without a socket (tests/server/lifecycle/).
"""

from __future__ import annotations

from typing import Protocol

from starlette.responses import Response
from starlette.types import Send


class Sink(Protocol):
    """Receives one answer: `start` once, then `write` until a chunk with `more=False`."""

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        """The status and the headers (latin-1 bytes, as ASGI has them), before any body."""
        ...

    async def write(self, chunk: bytes, *, more: bool) -> None:
        """A chunk of the body; `more=False` ends it."""
        ...


class AsgiSink:
    """A sink onto an ASGI `send`: the answer as the HTTP response."""

    __slots__ = ("_send",)

    def __init__(self, send: Send) -> None:
        self._send = send

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    async def write(self, chunk: bytes, *, more: bool) -> None:
        await self._send({"type": "http.response.body", "body": chunk, "more_body": more})


async def write_whole(sink: Sink, response: Response) -> None:
    """A response whose body is whole (a JSON answer, an error) into `sink`, in one chunk."""
    await sink.start(response.status_code, response.raw_headers)
    await sink.write(bytes(response.body), more=False)
