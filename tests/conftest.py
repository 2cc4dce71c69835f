"""Shared fixtures.

`gw`: a gateway with default settings on a fresh simulator (tests/support/gateway_harness.py).
`log_lines`: every loguru line (TRACE and up) with its bound fields, as text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from loguru import logger

from tests.support.gateway_harness import Gateway, open_gateway


@pytest.fixture
async def gw(tmp_path) -> AsyncIterator[Gateway]:
    async with open_gateway(tmp_path) as gateway:
        yield gateway


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message) + repr(message.record["extra"])), level="TRACE")
    yield lines
    logger.remove(sink)
