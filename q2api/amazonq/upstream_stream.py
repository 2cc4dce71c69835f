"""An open 200 reply from `GenerateAssistantResponse`, read chunk by chunk.

Once q2api.amazonq.upstream's `open_stream` yields one, the caller owns it and nothing is retried: a
read that fails or waits too long raises UpstreamUnavailable / UpstreamTimeout, and `close` gives the
account's in-flight slot back and releases (fully read) or drops (half read) the connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import aiohttp

from q2api.amazonq.errors import TimeoutPhase, UpstreamTimeout, UpstreamUnavailable
from q2api.amazonq.wait_deadline import WaitDeadline

REQUEST_ID_HEADER = "x-amzn-requestid"


class UpstreamStream:
    """An open 200 reply. Read it with `chunks()`; the owner of `open_stream` closes it."""

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        *,
        account_id: str,
        account_label: str,
        attempts: int,
        upstream_started_at: float,
        read_timeout: float,
        host: str = "",
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._response = response
        self._on_close = on_close  # gives the account's in-flight slot back, once
        self.account_id = account_id
        self.account_label = account_label
        self.host = host  # the host that served the reply
        self.attempts = attempts
        self.request_id: str | None = response.headers.get(REQUEST_ID_HEADER)
        self.upstream_started_at = upstream_started_at  # time.monotonic() when the first attempt began
        self.headers_received_at = time.monotonic()
        self._read_timeout = read_timeout
        self._at_eof = False
        # The silence between two reads of the body is timed here, with one lazy timer per stream
        # (wait_deadline.py). aiohttp's sock_read, which times the wait for the headers, is switched
        # off for the body: it re-arms a loop timer on every read (with the pump's per-wait timer, that
        # cost a paced reply ~15 % more CPU: BENCHMARKS.md, the table of optimisations).
        self._silence = WaitDeadline()
        self._last_bytes_at = asyncio.get_running_loop().time()
        connection = response.connection
        if connection is not None and connection.protocol is not None:
            connection.protocol.read_timeout = None

    @property
    def time_to_headers(self) -> float:
        """Seconds from the first attempt to the 200 headers (retries included)."""
        return self.headers_received_at - self.upstream_started_at

    def chunks(self) -> AsyncIterator[bytes]:
        """Raw body bytes as they arrive; raises UpstreamTimeout / UpstreamUnavailable mid-reply."""
        return _Chunks(self)

    def buffered(self) -> bytes | None:
        """Body bytes already received, taken without waiting; None if there are none (or the body failed).

        A failed body raises its error on the next `chunks()` read, where it is mapped.
        """
        try:
            data = self._response.content.read_nowait()
        except Exception:
            return None
        if not data:
            return None
        self._last_bytes_at = asyncio.get_running_loop().time()
        return data

    async def _read(self) -> bytes:
        silence = self._silence
        silence.begin(self._last_bytes_at + self._read_timeout)
        try:
            data = await self._response.content.readany()
        except asyncio.CancelledError:
            if silence.expired():
                raise UpstreamTimeout(TimeoutPhase.BETWEEN_FRAMES, self._read_timeout) from None
            raise
        except (TimeoutError, aiohttp.ServerTimeoutError):
            raise UpstreamTimeout(TimeoutPhase.BETWEEN_FRAMES, self._read_timeout) from None
        except aiohttp.ClientError as exc:
            raise UpstreamUnavailable(f"the connection to Amazon Q broke mid-reply ({type(exc).__name__})") from None
        finally:
            silence.end()
        if not data:
            self._at_eof = True
        self._last_bytes_at = asyncio.get_running_loop().time()
        return data

    def close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()
        self._silence.close()
        # A fully read reply can give its connection back to the pool; a
        # half-read one must drop it, which is what tells the upstream to stop.
        if self._at_eof:
            self._response.release()
        else:
            self._response.close()


class _Chunks:
    """An async iterator over body reads (a class, not a generator: nothing to finalise)."""

    def __init__(self, stream: UpstreamStream) -> None:
        self._stream = stream

    def __aiter__(self) -> _Chunks:
        return self

    async def __anext__(self) -> bytes:
        data = await self._stream._read()
        if not data:
            raise StopAsyncIteration
        return data


__all__ = ["REQUEST_ID_HEADER", "UpstreamStream"]
