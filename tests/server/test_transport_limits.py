"""Transport limits, probed with raw sockets: what one connection may cost the gateway.

Each abuse the defaults used to let through — huge or countless headers,
headers or a body that never finish, idle connections without end — gets a
status in the Anthropic envelope (or a plain close) within the configured
limit. The last test runs `q2api serve` itself to show the flags reach it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from q2api.server.transport import connection_cap, open_file_limit, transport_limits
from q2api.settings import ENV_VARIABLES, load_settings
from tests.support.gateway_harness import CLIENT_KEY, Gateway, capture_logs, open_gateway

LIMITS = {
    "Q2API_MAX_HEADER_BYTES": "4096",
    "Q2API_MAX_HEADERS": "20",
    "Q2API_HEADER_TIMEOUT": "0.5",
    "Q2API_BODY_TIMEOUT": "0.5",
    "Q2API_KEEP_ALIVE_TIMEOUT": "1",
    "Q2API_MAX_CONNECTIONS": "8",
}
WAIT = 10.0  # far above every limit above: a test that times out here found a door left open


@pytest.fixture
async def limited(tmp_path) -> AsyncIterator[Gateway]:
    async with open_gateway(tmp_path, **LIMITS) as gateway:
        yield gateway


def port_of(gateway: Gateway) -> int:
    return int(gateway.base_url.rsplit(":", 1)[1])


async def exchange(port: int, *parts: bytes, pause: float = 0.0) -> bytes:
    """Send `parts` (with `pause` between them) and collect what arrives until the gateway closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = bytearray()

    async def collect() -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(65536):
                received.extend(chunk)

    collecting = asyncio.create_task(collect())
    try:
        with contextlib.suppress(ConnectionError):  # the gateway may close before everything was sent
            for part in parts:
                if collecting.done():
                    break
                writer.write(part)
                await writer.drain()
                if pause:
                    await asyncio.sleep(pause)
        await asyncio.wait_for(collecting, WAIT)
    finally:
        writer.close()
    return bytes(received)


def status_and_error(answer: bytes) -> tuple[int, str]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"connection: close" in head.lower(), head
    document = json.loads(body)
    assert document["type"] == "error"
    return status, document["error"]["type"]


REQUEST_LINE = (
    b"POST /v1/messages HTTP/1.1\r\nHost: gateway\r\ncontent-type: application/json\r\nx-api-key: "
    + CLIENT_KEY.encode()
    + b"\r\n"
)


async def test_an_oversized_header_is_431_before_it_is_buffered(limited) -> None:
    # The header never ends: the gateway must not wait for it (nor keep its megabytes).
    answer = await exchange(port_of(limited), REQUEST_LINE + b"x-big: " + b"a" * 1_000_000)
    assert status_and_error(answer) == (431, "invalid_request_error")


async def test_too_many_headers_is_431(limited) -> None:
    headers = b"".join(b"x-h%d: 1\r\n" % index for index in range(50))
    answer = await exchange(port_of(limited), REQUEST_LINE + headers + b"\r\n")
    assert status_and_error(answer) == (431, "invalid_request_error")


async def test_headers_sent_slowly_are_408(limited) -> None:
    drip = [REQUEST_LINE] + [b"x-slow: 1\r\n"] * 40  # slowloris: a header every 0.1 s, never the end
    answer = await exchange(port_of(limited), *drip, pause=0.1)
    assert status_and_error(answer) == (408, "timeout_error")


async def test_a_connection_that_never_sends_a_request_is_closed(limited) -> None:
    assert await exchange(port_of(limited)) == b""


@pytest.mark.parametrize(
    "request_bytes",
    [
        REQUEST_LINE + b"content-length: 1000\r\n\r\n" + b'{"model":',  # a body shorter than announced
        REQUEST_LINE + b"transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",  # a chunked body that never ends
    ],
    ids=["short body", "unterminated chunked body"],
)
async def test_a_body_that_never_completes_is_408_and_logged(limited, request_bytes) -> None:
    with capture_logs() as logs:
        answer = await exchange(port_of(limited), request_bytes)
        await asyncio.sleep(0.2)  # the relay's own line follows the disconnect
    assert status_and_error(answer) == (408, "timeout_error")
    # The request still has its log line, with the status the client got.
    assert [line.extra["status"] for line in logs.request_lines()] == [408]
    assert limited.sim.requests == []


async def test_a_body_sent_slowly_is_408(limited) -> None:
    body = b'{"model": "m", "max_tokens": 1, "messages": []}'
    head = REQUEST_LINE + b"content-length: %d\r\n\r\n" % len(body)
    answer = await exchange(port_of(limited), head, *[bytes([byte]) for byte in body], pause=0.05)
    assert status_and_error(answer) == (408, "timeout_error")


async def test_an_idle_kept_alive_connection_is_closed(limited) -> None:
    answer = await exchange(port_of(limited), b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200")  # then the keep-alive timeout closed it


async def test_connections_beyond_the_limit_are_refused_with_503(limited) -> None:
    port = port_of(limited)
    idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(8)]
    try:
        await asyncio.sleep(0.1)
        answer = await exchange(port, b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n")
        assert status_and_error(answer) == (503, "overloaded_error")
    finally:
        for _, writer in idle:
            writer.close()


async def test_a_normal_request_is_untouched_by_the_limits(limited) -> None:
    async with limited.http() as http:
        response = await http.get("/healthz", headers={f"x-h{index}": "1" for index in range(10)})
    assert response.status_code == 200


def test_serve_takes_the_limits_as_flags(tmp_path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ENV_VARIABLES and not key.startswith(("Q2API_", "AMAZONQ_"))
    }
    env["Q2API_DATA_DIR"] = str(tmp_path / "data")
    process = subprocess.Popen(
        [sys.executable, "-m", "q2api", "serve", "--port", "0", "--max-headers", "10", "--header-timeout", "0.5"],
        env=env,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = None
        assert process.stderr is not None
        for line in process.stderr:
            if "Uvicorn running on" in line:
                port = int(line.rsplit(":", 1)[1].split()[0])
                break
        assert port is not None, "q2api serve did not start"
        headers = b"".join(b"x-h%d: 1\r\n" % index for index in range(15))
        answer = asyncio.run(exchange(port, b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n" + headers + b"\r\n"))
        assert status_and_error(answer) == (431, "invalid_request_error")
        assert asyncio.run(exchange(port)) == b""  # closed after the header timeout, not held open
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_default_connection_cap_follows_the_open_file_limit() -> None:
    # Two sockets per stream (client, Amazon Q), 64 files kept: the usual 1024 no longer caps at 400.
    assert connection_cap(1024) == 480
    assert connection_cap(65536) == 32736
    assert connection_cap(10) == 1
    assert transport_limits(load_settings({}, env_file=None)).max_connections == connection_cap(open_file_limit())
    assert transport_limits(load_settings({"Q2API_MAX_CONNECTIONS": "12"}, env_file=None)).max_connections == 12


async def test_every_connection_up_to_the_cap_is_served_and_the_refusal_says_what_to_raise(limited) -> None:
    # Eight connections (the cap) each hold a request in progress: all eight are answered.
    port = port_of(limited)
    held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(7)]
    try:
        await asyncio.sleep(0.1)
        answer = await exchange(port, b"GET /healthz HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        held.append(await asyncio.open_connection("127.0.0.1", port))
        await asyncio.sleep(0.1)
        refused = await exchange(port, b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n")
        assert status_and_error(refused) == (503, "overloaded_error")
        message = json.loads(refused.partition(b"\r\n\r\n")[2])["error"]["message"]
        assert "8 per worker" in message and "Q2API_MAX_CONNECTIONS" in message
    finally:
        for _, writer in held:
            writer.close()


def test_serve_raises_the_open_file_limit_and_logs_the_connection_cap(tmp_path) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1024:
        pytest.skip(f"the hard open-file limit is {hard}: nothing to raise")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ENV_VARIABLES and not key.startswith(("Q2API_", "AMAZONQ_"))
    }
    env["Q2API_DATA_DIR"] = str(tmp_path / "data")
    process = subprocess.Popen(
        [sys.executable, "-m", "q2api", "serve", "--port", "0"],
        env=env,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        # As a shell with `ulimit -Sn 1024` starts it.
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard)),  # noqa: PLW1509
    )
    try:
        lines = []
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if "Uvicorn running on" in line:
                break
        [cap_line] = [line for line in lines if "connection cap:" in line]
        raised = min(hard, 1 << 20) if hard != resource.RLIM_INFINITY else 1 << 20
        assert f"connection cap: {connection_cap(raised)} per worker, from the open-file limit of {raised}" in cap_line
    finally:
        process.terminate()
        process.wait(timeout=30)
