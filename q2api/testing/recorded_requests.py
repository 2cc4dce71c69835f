"""What the simulated Amazon Q upstream keeps of each request it answers, for a test to look at.

Every endpoint reads its request through `record_request`, which parses the JSON body once (None when
it is not JSON: a test can still read `raw`) and notes the local port it came in on, i.e. which of the
simulator's hosts (`SimulatedUpstream.add_host`) it reached.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import orjson
from aiohttp import web


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any  # the parsed JSON body (None if it was not JSON)
    raw: bytes
    received_at: float  # time.monotonic()
    port: int = -1  # the local port it came in on: which simulated host (add_host) it reached

    @property
    def access_token(self) -> str | None:
        value = self.headers.get("Authorization", "")
        return value[7:] if value.startswith("Bearer ") else None


async def record_request(request: web.Request) -> RecordedRequest:
    raw = await request.read()
    try:
        body = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        body = None
    return RecordedRequest(request.path, dict(request.headers), body, raw, time.monotonic(), _local_port(request))


def _local_port(request: web.Request) -> int:
    sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
    return sockname[1] if isinstance(sockname, tuple) else -1
