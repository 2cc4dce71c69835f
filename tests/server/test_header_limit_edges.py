"""A header block over Q2API_MAX_HEADER_BYTES that arrives whole in one read is refused too (raw sockets).

Before: the byte count was checked after parsing, and a block whose end was in the same read had
already reset it, so one oversized read of complete headers was served.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.support.gateway_harness import CLIENT_KEY, open_gateway

LIMIT = 4096
WAIT = 10.0


async def one_read_exchange(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)  # one write of a few KB on loopback: one read on the other side
        await writer.drain()
        received = bytearray()
        with contextlib.suppress(ConnectionError):
            while chunk := await asyncio.wait_for(reader.read(65536), WAIT):
                received.extend(chunk)
                if b"\r\n\r\n" in received and b"connection: close" not in received.lower():
                    break  # an answer on a kept-alive connection: the gateway will not close
        return bytes(received)
    finally:
        writer.close()


@pytest.mark.parametrize(
    "oversized",
    [
        pytest.param(b"x-big: " + b"a" * (2 * LIMIT) + b"\r\n", id="one-long-header"),
        pytest.param(b"".join(b"x-h%d: %s\r\n" % (n, b"b" * 500) for n in range(15)), id="many-medium-headers"),
    ],
)
async def test_complete_headers_over_the_limit_in_one_read_are_431(tmp_path, oversized: bytes) -> None:
    async with open_gateway(tmp_path, Q2API_MAX_HEADER_BYTES=str(LIMIT)) as gateway:
        port = int(gateway.base_url.rsplit(":", 1)[1])
        request = b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n" + oversized + b"\r\n"
        answer = await one_read_exchange(port, request)
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]

        within = b"GET /healthz HTTP/1.1\r\nHost: gateway\r\nx-api-key: " + CLIENT_KEY.encode() + b"\r\n\r\n"
        assert (await one_read_exchange(port, within)).startswith(b"HTTP/1.1 200 ")
