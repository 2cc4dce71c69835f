"""Shared fixtures. `gw`: a gateway with default settings on a fresh simulator (tests/gateway_harness.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway_harness import Gateway, open_gateway


@pytest.fixture
async def gw(tmp_path) -> AsyncIterator[Gateway]:
    async with open_gateway(tmp_path) as gateway:
        yield gateway
