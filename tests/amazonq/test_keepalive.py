"""Warm upstream connections over TLS: an idle connection is kept `keepalive_seconds` (Q2API_UPSTREAM_KEEPALIVE_SECONDS),
so the next request after an idle shorter than that opens no new connection (no TLS handshake), and one
after a longer idle opens one. The full-length figures (60 s idle) are bench/bench_upstream_tls.py's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from q2api.accounts.pool import build_account_pool
from q2api.accounts.store import SqliteAccountStore
from q2api.amazonq.upstream import UpstreamClient, UpstreamConfig, create_session
from q2api.server.wiring import env_account, refresh_endpoints
from q2api.settings import load_settings
from q2api.testing import scripts
from q2api.testing.simulated_upstream import SimulatedUpstream
from q2api.testing.tls import client_context, self_signed_certificate, server_context

PAYLOAD = {"conversationState": {"currentMessage": {"userInputMessage": {"content": "hi", "origin": "AI_EDITOR"}}}}


async def turn(client: UpstreamClient) -> None:
    async with client.open_stream(PAYLOAD) as stream:  # type: ignore[arg-type]
        async for _ in stream.chunks():
            pass


@pytest.mark.parametrize(("keepalive", "connections"), [(5.0, 1), (0.3, 2)], ids=["kept", "dropped"])
async def test_the_next_turn_reuses_the_tls_connection_while_it_is_kept(tmp_path: Path, keepalive, connections):
    cert, key = self_signed_certificate(tmp_path)
    async with SimulatedUpstream(ssl_context=server_context(cert, key), keepalive_timeout=60) as sim:
        assert sim.url.startswith("https://")
        sim.responder = lambda record: scripts.text_reply("ok")
        settings = load_settings({**sim.env(), "Q2API_DATA_DIR": str(tmp_path)}, env_file=None)
        async with create_session(keepalive_seconds=keepalive, ssl_context=client_context(cert)) as session:
            pool = await build_account_pool(
                SqliteAccountStore(tmp_path), session, endpoints=refresh_endpoints(settings), seed=env_account(settings)
            )
            client = UpstreamClient(session, pool, UpstreamConfig(endpoint=sim.url))
            await turn(client)
            await asyncio.sleep(1.0)  # the idle between two turns
            await turn(client)
    assert len(sim.connections_seen) == connections
