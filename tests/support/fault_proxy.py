"""A TCP proxy on loopback in front of a real database server, which a test can cut or freeze.

The running PostgreSQL and MariaDB servers cannot be stopped by a test, so the
gateway reaches them through this proxy instead:

* `cut()`: the database is down: every open connection is dropped and new
  ones are refused (the listening socket is closed);
* `freeze()`: the database hangs: connections (open and new) are accepted and
  kept, but not one byte is forwarded either way;
* `restore()`: the database answers again (frozen connections are dropped, as
  a database restart would).

It runs on the test's event loop, beside the in-process gateway. Its port stays its own while it is
down: a socket bound to it (never listening) holds it, so no other server started meanwhile (another
test's, in a parallel run) can take it, and `restore()` listens there again (SO_REUSEPORT on both).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import urllib.parse
from collections.abc import AsyncIterator

_CHUNK = 64 * 1024


class FaultProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._port_holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._port_holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self._port_holder.bind(("127.0.0.1", 0))
        self.port = self._port_holder.getsockname()[1]

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_port=True)
        return self

    def url_through(self, database_url: str) -> str:
        """`database_url` with its host and port replaced by this proxy's."""
        parts = urllib.parse.urlsplit(database_url)
        credentials = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urllib.parse.urlunsplit(parts._replace(netloc=f"{credentials}127.0.0.1:{self.port}"))

    async def cut(self) -> None:
        """Down: refuse new connections and drop the open ones."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        self._drop_all()

    def freeze(self) -> None:
        """Frozen: accept and hold every connection, forward nothing."""
        self._flowing.clear()

    async def restore(self) -> None:
        if not self._flowing.is_set():
            self._drop_all()  # a frozen connection holds a half-sent exchange: the server would have dropped it
            self._flowing.set()
        if self._server is None:
            await self.start()

    async def stop(self) -> None:
        await self.cut()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._port_holder.close()

    @property
    def open_connections(self) -> int:
        return len(self._writers) // 2

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self._writers.add(client_writer)
        try:
            await self._flowing.wait()
            server_reader, server_writer = await asyncio.open_connection(*self._target)
        except (OSError, asyncio.CancelledError):
            self._close(client_writer)
            return
        self._writers.add(server_writer)
        for reader, writer in ((client_reader, server_writer), (server_reader, client_writer)):
            task = asyncio.get_running_loop().create_task(self._pipe(reader, writer, client_writer, server_writer))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *ends: asyncio.StreamWriter,
    ) -> None:
        try:
            while data := await reader.read(_CHUNK):
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for end in ends:
                self._close(end)

    def _drop_all(self) -> None:
        for writer in list(self._writers):
            self._close(writer)

    def _close(self, writer: asyncio.StreamWriter) -> None:
        self._writers.discard(writer)
        with contextlib.suppress(Exception):
            writer.transport.abort()


@contextlib.asynccontextmanager
async def fault_proxy(database_url: str) -> AsyncIterator[FaultProxy]:
    """A proxy in front of the server `database_url` names (host and port), stopped at the block's end."""
    parts = urllib.parse.urlsplit(database_url)
    default_port = 5432 if parts.scheme.startswith("postgres") else 3306
    proxy = await FaultProxy(parts.hostname or "127.0.0.1", parts.port or default_port).start()
    try:
        yield proxy
    finally:
        await proxy.stop()
