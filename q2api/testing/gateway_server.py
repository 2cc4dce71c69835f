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
import threading
from collections.abc import AsyncIterator

import uvicorn

from q2api.admin.app import create_gateway_app
from q2api.server.transport import transport_limits, uvicorn_options
from q2api.settings import Settings


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
    server = uvicorn.Server(config)
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
        server.should_exit = True
        await serving


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
