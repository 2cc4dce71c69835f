"""HTTP_PROXY is honoured: token refreshes and GenerateAssistantResponse calls go through the proxy.

The proxy here is a minimal plain-HTTP forward proxy on 127.0.0.1 (absolute-form request
targets, response bodies streamed back as they arrive), enough to show the gateway's
aiohttp session really routes through it rather than connecting directly.
"""

from __future__ import annotations

import aiohttp
import anthropic
import httpx2
from aiohttp import web

from q2api.settings import load_settings
from q2api.testing import scripts
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_upstream import SimulatedUpstream

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "content-length", "host"}


class ForwardProxy:
    def __init__(self) -> None:
        self.forwarded: list[str] = []
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""

    async def __aenter__(self) -> ForwardProxy:
        self._session = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._runner is not None and self._session is not None
        await self._runner.cleanup()
        await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        target = str(request.url)  # absolute-form target: the URL the client wants
        self.forwarded.append(f"{request.method} {request.url.path}")
        headers = {name: value for name, value in request.headers.items() if name.lower() not in _HOP_BY_HOP}
        async with self._session.request(request.method, target, headers=headers, data=await request.read()) as reply:
            response = web.StreamResponse(status=reply.status)
            for name, value in reply.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    response.headers[name] = value
            await response.prepare(request)
            async for chunk in reply.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response


async def test_upstream_and_refresh_calls_go_through_http_proxy(tmp_path, monkeypatch):
    async with SimulatedUpstream() as sim, ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        sim.enqueue(scripts.text_reply("through the proxy", chunks=3))
        message = await _ask_through_gateway(sim, tmp_path / "proxied")
        assert message.content[0].text == "through the proxy"
        # The OIDC refresh, the IdC login's profile lookup (awsJson `POST /`), the start-up catalogue and
        # credit reads, then GenerateAssistantResponse.
        assert proxy.forwarded[0] == "POST /token" and proxy.forwarded[-1] == "POST /"
        assert {"POST /", "GET /ListAvailableModels", "GET /getUsageLimits"} == set(proxy.forwarded[1:-1])
        forwarded_first = len(proxy.forwarded)

        # NO_PROXY exempts the upstream's host.
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        sim.enqueue(scripts.text_reply("direct", chunks=1))
        message = await _ask_through_gateway(sim, tmp_path / "direct")
        assert message.content[0].text == "direct"
        assert len(proxy.forwarded) == forwarded_first
    assert len(sim.requests) == 2


async def _ask_through_gateway(sim, data_dir):
    settings = load_settings({**sim.env(), "Q2API_DATA_DIR": str(data_dir)}, env_file=None)
    async with running_gateway(settings) as base_url:
        # The test's own client connects directly (no trust_env), so every proxied call is the gateway's.
        direct = httpx2.AsyncClient(trust_env=False)
        async with anthropic.AsyncAnthropic(
            base_url=base_url, api_key="unused", max_retries=0, http_client=direct
        ) as client:
            return await client.messages.create(
                model="claude-sonnet-5-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            )
