"""Two tiny tunnelling proxies on 127.0.0.1, written for the tests: SOCKS5 (RFC 1928, with the
username/password method of RFC 1929) and HTTP CONNECT. Each records the targets it opened
tunnels to, so a test sees that a call really went through it (and which credentials it was given).

    async with Socks5Proxy(username="u", password="p") as proxy:
        proxy.url            # socks5://u:p@127.0.0.1:PORT
        proxy.tunnels        # ["127.0.0.1:8443", …]
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import struct


class _TunnelProxy:
    scheme = ""

    def __init__(self, *, username: str | None = None, password: str | None = None) -> None:
        self.username = username
        self.password = password
        self.tunnels: list[str] = []  # "host:port" of every tunnel opened
        self.sent = bytearray()  # what clients sent through the tunnels (plain HTTP on loopback: readable)
        self.refused = 0  # clients turned away (bad credentials, unknown request)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        credentials = f"{self.username}:{self.password}@" if self.username is not None else ""
        return f"{self.scheme}://{credentials}127.0.0.1:{self.port}"

    async def __aenter__(self) -> _TunnelProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        try:
            target = await self._handshake(reader, writer)
            if target is None:
                self.refused += 1
                return
            host, port = target
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
            self.tunnels.append(f"{host}:{port}")
            await self._accepted(writer)
            await asyncio.gather(_pipe(reader, upstream_writer, self.sent), _pipe(upstream_reader, writer))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # the proxy is closing: the handler ends quietly (asyncio would report a cancelled handler)
        finally:
            self._pipes.discard(task)
            writer.close()

    async def _handshake(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[str, int] | None:  # pragma: no cover - overridden
        raise NotImplementedError

    async def _accepted(self, writer: asyncio.StreamWriter) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class Socks5Proxy(_TunnelProxy):
    scheme = "socks5"

    async def _handshake(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[str, int] | None:
        version, count = await reader.readexactly(2)
        methods = await reader.readexactly(count)
        wanted = 2 if self.username is not None else 0  # 2: username/password, 0: none
        if version != 5 or wanted not in methods:
            writer.write(b"\x05\xff")
            return None
        writer.write(bytes([5, wanted]))
        if wanted == 2:
            _, length = await reader.readexactly(2)
            username = (await reader.readexactly(length)).decode()
            (length,) = await reader.readexactly(1)
            password = (await reader.readexactly(length)).decode()
            if (username, password) != (self.username, self.password):
                writer.write(b"\x01\x01")
                return None
            writer.write(b"\x01\x00")
        version, command, _, address_type = await reader.readexactly(4)
        if address_type == 1:
            host = str(ipaddress.IPv4Address(await reader.readexactly(4)))
        elif address_type == 3:
            (length,) = await reader.readexactly(1)
            host = (await reader.readexactly(length)).decode()
        else:
            host = str(ipaddress.IPv6Address(await reader.readexactly(16)))
        (port,) = struct.unpack("!H", await reader.readexactly(2))
        if version != 5 or command != 1:  # CONNECT only
            writer.write(b"\x05\x07\x00\x01\x00\x00\x00\x00\x00\x00")
            return None
        return host, port

    async def _accepted(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"\x05\x00\x00\x01\x7f\x00\x00\x01\x00\x00")
        await writer.drain()


class ConnectProxy(_TunnelProxy):
    scheme = "http"

    async def _handshake(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[str, int] | None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        method, target, _ = head[0].split(" ", 2)
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in head[1:])}
        if self.username is not None:
            expected = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            if headers.get("proxy-authorization") != f"Basic {expected}":
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
                return None
        if method != "CONNECT":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return None
        host, _, port = target.rpartition(":")
        return host.strip("[]"), int(port)

    async def _accepted(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: bytearray | None = None) -> None:
    try:
        while data := await reader.read(65536):
            if seen is not None:
                seen += data
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.write_eof()
