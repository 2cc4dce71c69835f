"""The real gateway (Starlette app under uvicorn) on a free 127.0.0.1 port, for tests, benchmarks and the demo.

Async use, inside a running loop::

    async with running_gateway(settings) as base_url:
        client = anthropic.AsyncAnthropic(base_url=base_url, api_key="...")

Threaded use (the demo, synchronous clients)::

    with GatewayThread(settings) as gateway:
        gateway.base_url
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import threading
import time
from collections.abc import AsyncIterator

import uvicorn

from q2api.admin.app import create_gateway_app
from q2api.server.transport import transport_limits, uvicorn_options
from q2api.settings import Settings

_SHUTDOWN_POLL = 0.005  # seconds between two looks at the connections still open while stopping


@contextlib.asynccontextmanager
async def running_gateway(settings: Settings, *, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve the gateway until the block exits; yields its base URL (`http://127.0.0.1:PORT`).
    `port` 0: a free one."""
    config = uvicorn.Config(
        create_gateway_app(settings),
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
        **uvicorn_options(transport_limits(settings)),
    )
    server = _PromptServer(config)
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if serving.done():
                serving.result()  # start-up failed: raise its error
                raise RuntimeError("the gateway stopped during start-up")
            await asyncio.sleep(0.005)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        await serving


class _PromptServer(uvicorn.Server):
    """uvicorn's Server, stopping as soon as it is told to.

    uvicorn looks at `should_exit` every 100 ms, and its shutdown sleeps 100 ms before it looks at
    the open connections (then polls them every 100 ms): a test suite that starts a gateway per test
    spent ~180 ms closing each, nearly all of it asleep. Here `stop()` wakes the main loop at once,
    and the shutdown takes uvicorn's own steps — stop accepting, ask every connection to close, wait
    for them and the background tasks within `timeout_graceful_shutdown` (then cancel the tasks), the
    lifespan's shutdown — looking every few milliseconds instead.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        self.should_exit = True
        self._stopping.set()

    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):  # once a tick, as uvicorn's: the date header, should_exit
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.1):
                    await self._stopping.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for listener in self.servers:
            listener.close()
        for sock in sockets or []:
            sock.close()
        state = self.server_state
        for connection in list(state.connections):
            connection.shutdown()
        grace = self.config.timeout_graceful_shutdown  # None: as long as it takes, as in uvicorn
        deadline = time.monotonic() + (math.inf if grace is None else grace)
        if state.tasks:
            _done, unfinished = await asyncio.wait(set(state.tasks), timeout=grace)
            for task in unfinished:
                task.cancel(msg="the gateway stopped before this request ended")
        # No event says a connection closed: its protocol leaves `connections` in connection_lost.
        while state.connections and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(_SHUTDOWN_POLL)
        for listener in self.servers:
            await listener.wait_closed()
        await self.lifespan.shutdown()


class GatewayThread:
    """`running_gateway` on its own event loop in a daemon thread."""

    def __init__(self, settings: Settings, *, port: int = 0) -> None:
        self._settings = settings
        self._port = port
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._error: BaseException | None = None
        self.base_url = ""
        self._thread = threading.Thread(target=self._run, name="q2api-gateway", daemon=True)

    def __enter__(self) -> GatewayThread:
        self._thread.start()
        self._ready.wait(timeout=30)
        if self._error is not None:
            raise RuntimeError("the gateway failed to start") from self._error
        if not self.base_url:
            raise RuntimeError("the gateway did not start within 30 s")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with running_gateway(self._settings, port=self._port) as base_url:
            self.base_url = base_url
            self._ready.set()
            await self._stop.wait()
