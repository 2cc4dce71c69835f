"""A simulated Amazon Q upstream on 127.0.0.1, for tests, benchmarks and `q2api demo`.

One aiohttp server plays four services:

* `POST /` (and `/generateAssistantResponse`): GenerateAssistantResponse
  (:mod:`q2api.testing.simulated_generate`), answering each request with the next
  queued reply script (see :mod:`q2api.testing.scripts`), or with
  `responder(request)`, or with an echo;
* `ListAvailableModels` and `GetUsageLimits` in both wire flavours
  (`sim.services`, see :mod:`q2api.testing.simulated_services`);
* `POST /token`: the AWS SSO OIDC refresh grant, and `POST /refreshToken`: the Kiro
  social refresh (:mod:`q2api.testing.simulated_tokens`);
* `POST /client/register`, `POST /device_authorization` and the device-code
  grant of `POST /token`: device-code login (:mod:`q2api.testing.simulated_oidc`);
* `POST /mcp`: Kiro's web search (`sim.mcp`, :mod:`q2api.testing.simulated_mcp`);
* `ListAvailableProfiles` (awsJson, `sim.services.profiles`): an IdC account's `profileArn`.

Kiro API keys (`add_api_key`) are accepted by every call with `tokentype: API_KEY` (docs/protocol.md#kiro-api-keys),
and refused as an invalid bearer without it.

GenerateAssistantResponse also plays native reasoning (`sim.reasoning`,
:mod:`q2api.testing.simulated_reasoning`): it checks `additionalModelRequestFields` against the
model's catalogue schema and the history's reasoning signatures (a rejected-signature mode
included), and its own replies to a request that asks for reasoning start with signed
`reasoningContentEvent` frames. With `usage_frames = True` every streamed reply ends with the
closing frames of :mod:`q2api.testing.simulated_accounting` — token usage with cache figures
computed from the request's cache points, credits, context use — after its own frames (off by
default: scripted replies then stay exactly as scripted).

What it assumes about the real service is one table, q2api.testing.assumptions (its parts read their
defaults there; `q2api probe --compare` checks the table against a real account). `enforce_limits()`
makes it refuse bodies and histories over the limits of that table.

`await sim.add_host(HostRules.runtime())` adds an address with the rules of one of the 2026 hosts
(:mod:`q2api.testing.simulated_hosts`: token kinds it refuses, a required profile, legacy fields
refused, a host that resets every connection or answers 404, a token kind refused on every call);
`ssl_context` makes every address speak TLS, and `connections_seen` counts the client
connections (handshakes) it accepted.

It records every request (:mod:`q2api.testing.recorded_requests`), knows which access
tokens it has issued (with `check_tokens=True` others get the real 403 "bearer token
invalid"), and counts streams, disconnects and open connections so a test can see that a
client going away really closed the upstream connection.

GenerateAssistantResponse and the token service are base classes of `SimulatedUpstream`, each
in its own module with its own state: their attributes are the simulator's (`sim.responder`,
`sim.refresh_failure`), the surface every test scripts. This module is the server that plays
them: its lifecycle, addresses and hosts, and the one working account of `env()`.

Async use: ``async with SimulatedUpstream() as sim: ... sim.url``.
Threaded use (CLI demo, benchmarks): ``handle = SimulatedUpstream.run_in_thread(); handle.url; handle.stop()``
(:mod:`q2api.testing.simulation_thread`).
"""

from __future__ import annotations

import asyncio
import collections
import socket
import ssl
import struct
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from q2api.testing.simulated_accounting import SimulatedAccounting
from q2api.testing.simulated_generate import GenerateAssistantResponse
from q2api.testing.simulated_hosts import GoneAddresses, HostRules
from q2api.testing.simulated_mcp import SimulatedMcp
from q2api.testing.simulated_reasoning import SimulatedReasoning
from q2api.testing.simulated_services import SERVICE_TARGET_PREFIX, SimulatedServices
from q2api.testing.simulated_tokens import TokenEndpoints
from q2api.testing.simulation_thread import SimulationThread

# The one working account `env()` points a gateway at.
SIM_CLIENT_ID = "sim-client-id"
SIM_CLIENT_SECRET = "sim-client-secret"
SIM_REFRESH_TOKEN = "sim-refresh-0"
SIM_PROFILE_ARN = "arn:aws:codewhisperer:us-east-1:000000000000:profile/SIMULATED"


class SimulatedUpstream(GenerateAssistantResponse, TokenEndpoints):
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        check_tokens: bool = False,
        token_lifetime: int = 3600,
        rotate_refresh_tokens: bool = False,
        refresh_delay: float = 0.0,
        ssl_context: ssl.SSLContext | None = None,
        keepalive_timeout: float = 75.0,
    ) -> None:
        self.host = host
        self.port = port
        self.ssl_context = ssl_context  # TLS on every port (a self-signed certificate: q2api.testing.tls)
        self.keepalive_timeout = keepalive_timeout  # an idle client connection is closed after this
        # Extra hosts (add_host): local port -> the rules of the host behind it.
        self.host_rules: dict[int, HostRules] = {}
        self.gone = GoneAddresses(host)  # addresses of hosts taken down, held until `stop()`
        # Client connections seen (their peer addresses): with TLS each one is one handshake.
        self.connections_seen: set[tuple[Any, ...]] = set()
        self.calls: collections.Counter[str] = collections.Counter()  # every HTTP request, by path
        self.resets = 0  # connections reset by a resetting host (HostRules.resetting)
        TokenEndpoints.__init__(
            self,
            base_url=lambda: self.base_url,
            client=(SIM_CLIENT_ID, SIM_CLIENT_SECRET),
            profile_arn=SIM_PROFILE_ARN,
            check_tokens=check_tokens,
            token_lifetime=token_lifetime,
            rotate_refresh_tokens=rotate_refresh_tokens,
            refresh_delay=refresh_delay,
        )
        GenerateAssistantResponse.__init__(self)
        self.services = SimulatedServices(self.token_accounts, self._token_accepted)
        self.api_keys = self.services.api_keys
        self.mcp = SimulatedMcp(self._token_accepted, self.api_keys)
        self.reasoning = SimulatedReasoning()
        self.accounting = SimulatedAccounting()
        self._runner: web.AppRunner | None = None

    # -- lifecycle ------------------------------------------------------------

    async def start(self) -> SimulatedUpstream:
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[self._count, self._host_rules_first])
        app.router.add_post("/", self._generate)
        app.router.add_post("/generateAssistantResponse", self._generate)
        app.router.add_post("/token", self._oidc_token)
        app.router.add_post("/refreshToken", self._kiro_refresh)
        app.router.add_post("/client/register", self._device_call(self.device.register))
        app.router.add_post("/device_authorization", self._device_call(self.device.start))
        app.router.add_get("/ListAvailableModels", self.services.rest)
        app.router.add_get("/getUsageLimits", self.services.rest)
        app.router.add_post("/mcp", self.mcp.handle)
        # handler_cancellation: a client disconnect cancels the handler at once,
        # which is how the simulator notices it even in the middle of a pause.
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, keepalive_timeout=self.keepalive_timeout
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024, ssl_context=self.ssl_context)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def add_host(self, rules: HostRules) -> HostRules:
        """One more address of this upstream, answering by `rules` (q2api.testing.simulated_hosts)."""
        assert self._runner is not None, "start the simulator first"
        site = web.TCPSite(self._runner, self.host, 0, backlog=1024, ssl_context=self.ssl_context)
        await site.start()
        rules.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        rules.url = f"{self._scheme}://{self.host}:{rules.port}/"
        self.host_rules[rules.port] = rules
        return rules

    async def stop(self) -> None:
        self.gone.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> SimulatedUpstream:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @classmethod
    def run_in_thread(cls, **options: Any) -> SimulationThread:
        """Start a simulator on its own event loop in a daemon thread."""
        return SimulationThread(cls(**options))

    @web.middleware
    async def _count(self, request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        self.calls[request.path] += 1
        response: web.StreamResponse = await handler(request)
        return response

    @web.middleware
    async def _host_rules_first(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        """The rules an extra host applies to every call before it reaches its handler: a reset, a 404,
        a refused token kind (q2api.testing.simulated_hosts)."""
        sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
        rules = self.host_rules.get(sockname[1]) if isinstance(sockname, tuple) else None
        if rules is not None and rules.resets_connections:
            rules.refused += 1
            self.resets += 1
            _reset(request)
            raise asyncio.CancelledError  # nothing is answered: the connection is gone
        if rules is not None:
            # The catalogue and credits calls meet the token rule here; GenerateAssistantResponse and the
            # MCP endpoint meet it in their handlers, which record the calls they refuse.
            token_kind = self._kind_of_bearer(request) if _is_service_call(request) else None
            refusal = rules.before_answer(token_kind)
            if refusal is not None:
                return web.Response(status=refusal.status, body=refusal.body, headers=refusal.headers)
        response: web.StreamResponse = await handler(request)
        return response

    def _kind_of_bearer(self, request: web.Request) -> str | None:
        if any(name.lower() == "tokentype" and value.upper() == "API_KEY" for name, value in request.headers.items()):
            return "api_key"
        value = request.headers.get("Authorization", "")
        return self.token_kinds.get(value[7:]) if value.startswith("Bearer ") else None

    # -- addresses ------------------------------------------------------------

    @property
    def _scheme(self) -> str:
        return "https" if self.ssl_context is not None else "http"

    @property
    def base_url(self) -> str:
        return f"{self._scheme}://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The GenerateAssistantResponse endpoint (AMAZONQ_ENDPOINT)."""
        return self.base_url + "/"

    @property
    def oidc_url(self) -> str:
        """The OIDC base URL (AMAZONQ_OIDC_ENDPOINT); refreshes go to `{oidc_url}/token`."""
        return self.base_url

    @property
    def kiro_refresh_url(self) -> str:
        return self.base_url + "/refreshToken"

    def env(self, auth_method: str = "idc") -> dict[str, str]:
        """Environment variables pointing a gateway at this simulator with one working account.

        The account's method follows from its client registration: given for `idc`, left out for `social`.
        """
        env = {
            "AMAZONQ_ENDPOINT": self.url,
            "AMAZONQ_OIDC_ENDPOINT": self.oidc_url,
            "AMAZONQ_KIRO_REFRESH_ENDPOINT": self.kiro_refresh_url,
            "AMAZONQ_REFRESH_TOKEN": SIM_REFRESH_TOKEN,
        }
        if auth_method == "idc":
            env["AMAZONQ_CLIENT_ID"] = SIM_CLIENT_ID
            env["AMAZONQ_CLIENT_SECRET"] = SIM_CLIENT_SECRET
        return env

    # -- state ----------------------------------------------------------------

    @property
    def open_connections(self) -> int:
        """TCP connections currently open to the server (idle keep-alive ones included)."""
        if self._runner is None or self._runner.server is None:
            return 0
        return len(self._runner.server.connections)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Poll `predicate` until true (returns True) or `timeout` passes (returns False)."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True


def _is_service_call(request: web.Request) -> bool:
    """ListAvailableModels or getUsageLimits, in either flavour (ListAvailableProfiles answers its own
    refusals: "Unsupported token type", A9)."""
    if request.path in ("/ListAvailableModels", "/getUsageLimits"):
        return True
    target = request.headers.get("X-Amz-Target", "")
    operation = target.removeprefix(SERVICE_TARGET_PREFIX).lower() if target.startswith(SERVICE_TARGET_PREFIX) else ""
    return request.path == "/" and operation in ("listavailablemodels", "getusagelimits")


def _reset(request: web.Request) -> None:
    """Drop the request's connection with a TCP reset (SO_LINGER 0), as a filtering middlebox does."""
    transport = request.transport
    if transport is None:
        return
    raw = transport.get_extra_info("socket")
    if raw is not None:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
