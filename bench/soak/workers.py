"""Connections kept to each worker of a gateway, and which worker answered one (from /proc).

uvicorn's `--workers` share one listening socket, and the kernel hands each new connection to one
of them; the soak needs to reach every worker (to show a revoked key is refused by each, to read
each one's count of tasks). The server side of a loopback connection is the socket whose local port
is the gateway's and whose remote port is the client's; its inode appears among the descriptors of
exactly one process. A connection kept alive stays with the worker that accepted it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from bench.support.http_body import HEAD_END, BodyReader, parse_head

if TYPE_CHECKING:
    from bench.soak.deployments import Fleet


def _server_socket_inode(server_port: int, client_port: int) -> str | None:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, remote, inode = fields[1], fields[2], fields[9]
                if int(local.rsplit(":", 1)[1], 16) == server_port and int(remote.rsplit(":", 1)[1], 16) == client_port:
                    return inode
    return None


def serving_process(server_port: int, client_port: int, candidates: list[int]) -> int | None:
    """The pid among `candidates` holding the server side of the connection from `client_port`."""
    inode = _server_socket_inode(server_port, client_port)
    if inode is None:
        return None
    wanted = f"socket:[{inode}]"
    for pid in candidates:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted:
                        return pid
    return None


class KeptConnection:
    """One HTTP/1.1 connection kept alive to a gateway process, so that every probe reaches the same worker."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.port = int(target.rsplit(":", 1)[1])
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.client_port = 0
        self.last_request_id: str | None = None

    async def request(
        self, method: str, path: str, document: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        """The status and body of one request; the connection is opened again if the server closed it."""
        if self._stream is None or self._stream[1].is_closing():
            self._stream = await asyncio.open_connection("127.0.0.1", self.port)
            self.client_port = self._stream[1].get_extra_info("sockname")[1]
        reader, writer = self._stream
        body = orjson.dumps(document) if document is not None else b""
        header_lines = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{header_lines}\r\n".encode()
            + body
        )
        try:
            reply_head = (await reader.readuntil(HEAD_END))[: -len(HEAD_END)]
            status, chunked, length = parse_head(reply_head)
            self.last_request_id = next(
                (
                    line.split(b":", 1)[1].strip().decode()
                    for line in reply_head.split(b"\r\n")
                    if line.lower().startswith(b"request-id:")
                ),
                None,
            )
            body_reader = BodyReader(chunked, length)
            received: list[bytes] = []
            while not body_reader.complete:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionResetError("the gateway closed the connection mid-reply")
                received.append(body_reader.feed(data))
        except (asyncio.IncompleteReadError, OSError):
            self.close()
            raise
        return status, b"".join(received)

    async def worker(self, candidates: list[int]) -> int | None:
        """The process among `candidates` that holds the other end of this connection."""
        return await asyncio.to_thread(serving_process, self.port, self.client_port, candidates)

    def close(self) -> None:
        if self._stream is not None:
            self._stream[1].close()
            self._stream = None


async def connections_to_every_worker(
    fleet: Fleet, first: Callable[[KeptConnection], Awaitable[object]], attempts: int = 60
) -> list[KeptConnection]:
    """One kept-alive connection per worker of each process: new connections (each opened by `first`)
    until every worker has one."""
    pins: list[KeptConnection] = []
    for target, workers in fleet.worker_pids().items():
        covered: set[int] = set()
        for _ in range(attempts):
            if covered >= set(workers):
                break
            connection = KeptConnection(target)
            with contextlib.suppress(OSError, asyncio.IncompleteReadError, TimeoutError):
                await first(connection)
            worker = await connection.worker(workers) if connection.client_port else None
            if worker is not None and worker not in covered:
                covered.add(worker)
                pins.append(connection)
            else:
                connection.close()
    return pins
