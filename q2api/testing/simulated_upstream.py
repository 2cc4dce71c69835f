"""A simulated Amazon Q upstream on 127.0.0.1, for tests, benchmarks and `q2api demo`.

One aiohttp server plays four services:

* `POST /` (and `/generateAssistantResponse`): GenerateAssistantResponse,
  answering each request with the next queued reply script (see
  :mod:`q2api.testing.scripts`), or with `responder(request)`, or with an echo;
* `ListAvailableModels` and `GetUsageLimits` in both wire flavours
  (`sim.services`, see :mod:`q2api.testing.simulated_services`);
* `POST /token`: the AWS SSO OIDC refresh grant;
* `POST /refreshToken`: the Kiro social refresh;
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
refused); `ssl_context` makes every address speak TLS, and `connections_seen` counts the client
connections (handshakes) it accepted.

It records every request, knows which access tokens it has issued (with
`check_tokens=True` others get the real 403 "bearer token invalid"), and counts
streams, disconnects and open connections so a test can see that a client
going away really closed the upstream connection.

Async use: ``async with SimulatedUpstream() as sim: ... sim.url``.
Threaded use (CLI demo, benchmarks): ``handle = SimulatedUpstream.run_in_thread(); handle.url; handle.stop()``.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import orjson
from aiohttp import web

from q2api.testing import assumptions, scripts
from q2api.testing.assumptions import SIMULATOR
from q2api.testing.scripts import Abort, ErrorReply, Hangup, Pause, Reply, Send, StreamReply
from q2api.testing.simulated_accounting import SimulatedAccounting
from q2api.testing.simulated_hosts import HostRules
from q2api.testing.simulated_mcp import SimulatedMcp
from q2api.testing.simulated_oidc import DEVICE_CODE_GRANT, SimulatedDeviceAuthorization
from q2api.testing.simulated_reasoning import SimulatedReasoning, reasoning_frames, wants_reasoning
from q2api.testing.simulated_services import (
    AWS_JSON,
    KEY_WITHOUT_TOKEN_TYPE,
    SERVICE_TARGET_PREFIX,
    SimulatedServices,
    bearer_of,
)

Responder = Callable[["RecordedRequest"], "Reply | None"]
T = TypeVar("T")

SIM_CLIENT_ID = "sim-client-id"
SIM_CLIENT_SECRET = "sim-client-secret"
SIM_REFRESH_TOKEN = "sim-refresh-0"
SIM_PROFILE_ARN = "arn:aws:codewhisperer:us-east-1:000000000000:profile/SIMULATED"


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


class SimulatedUpstream:
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
        # Client connections seen (their peer addresses): with TLS each one is one handshake.
        self.connections_seen: set[tuple[Any, ...]] = set()
        self.check_tokens = check_tokens
        self.token_lifetime = token_lifetime
        self.rotate_refresh_tokens = rotate_refresh_tokens
        self.refresh_delay = refresh_delay  # seconds each refresh call takes
        self.responder: Responder | None = None
        self.replies: collections.deque[Reply] = collections.deque()

        # Token state. `valid_refresh_tokens` None = accept any refresh token.
        self.valid_access_tokens: set[str] = set()
        self.valid_refresh_tokens: set[str] | None = None
        self.oidc_client: tuple[str, str] | None = (SIM_CLIENT_ID, SIM_CLIENT_SECRET)
        self.kiro_profile_arn = SIM_PROFILE_ARN
        # "invalid_grant" | "invalid_client" | "server_error" | None: how refresh calls fail.
        self.refresh_failure: str | None = None
        self.device = SimulatedDeviceAuthorization(lambda: self.base_url, self.issue_access_token)

        # access token -> the refresh token it was issued for, so each account can see its own catalogue
        self.token_accounts: dict[str, str] = {}
        # access token -> "social" (Kiro refresh) or "idc" (OIDC): which hosts refuse it (A8.3)
        self.token_kinds: dict[str, str] = {}
        self.services = SimulatedServices(self.token_accounts, self._token_accepted)
        self.api_keys = self.services.api_keys
        self.mcp = SimulatedMcp(self._token_accepted, self.api_keys)
        self.reasoning = SimulatedReasoning()
        self.accounting = SimulatedAccounting()
        self.usage_frames = False  # end every streamed reply with usage, credits and context frames
        # Answer a GenerateAssistantResponse without `profileArn` as a host that needs one does.
        self.require_profile = False
        # The request limits (docs/protocol.md#limits): None = not enforced, the default, since tests model
        # conversations beyond them to show the gateway sends them unchanged. `enforce_limits()` plays
        # those of q2api.testing.assumptions.
        self.body_limit: int | None = None  # bytes of the whole body
        self.history_cap: int | None = None  # history messages
        self.calls: collections.Counter[str] = collections.Counter()  # every HTTP request, by path

        self.requests: list[RecordedRequest] = []  # GenerateAssistantResponse calls
        self.refresh_requests: list[RecordedRequest] = []  # /token and /refreshToken calls
        # Refresh tokens retired by a rotation, and how many refresh calls presented one anyway
        # (refused with invalid_grant when `valid_refresh_tokens` is a set).
        self.retired_refresh_tokens: set[str] = set()
        self.retired_refresh_uses = 0
        self.streams_started = 0
        self.streams_completed = 0
        self.disconnects = 0  # the client went away before the reply ended
        self.bytes_streamed = 0  # reply body bytes written, over all streams
        self.aborts = 0  # the simulator dropped the connection on purpose (an Abort step)
        self._serial = itertools.count(1)
        self._runner: web.AppRunner | None = None

    # -- lifecycle ------------------------------------------------------------

    async def start(self) -> SimulatedUpstream:
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[self._count])
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

    # -- scripting ------------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        """Queue replies; each GenerateAssistantResponse call takes the next one."""
        self.replies.extend(replies)

    def issue_access_token(self) -> str:
        token = f"sim-access-{next(self._serial)}"
        self.valid_access_tokens.add(token)
        return token

    def add_api_key(self, key: str) -> str:
        """Accept the Kiro API key `key` from now on (it is its own account for the catalogue and credits)."""
        self.api_keys.add(key)
        self.token_accounts[key] = key
        return key

    def revoke_access_tokens(self) -> None:
        self.valid_access_tokens.clear()

    @property
    def refresh_calls(self) -> int:
        return len(self.refresh_requests)

    @property
    def open_connections(self) -> int:
        """TCP connections currently open to the server (idle keep-alive ones included)."""
        if self._runner is None or self._runner.server is None:
            return 0
        return len(self._runner.server.connections)

    @property
    def active_streams(self) -> int:
        return self.streams_started - self.streams_completed - self.disconnects - self.aborts

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Poll `predicate` until true (returns True) or `timeout` passes (returns False)."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    # -- GenerateAssistantResponse ---------------------------------------------

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        record = await _record(request)
        peer = request.transport.get_extra_info("peername") if request.transport is not None else None
        if isinstance(peer, tuple):
            self.connections_seen.add(peer)
        target = request.headers.get("X-Amz-Target", "")
        token = bearer_of(record.headers, self.api_keys)
        if target.startswith(SERVICE_TARGET_PREFIX):
            params = record.body if isinstance(record.body, dict) else {}
            return self.services.answer(AWS_JSON, target.removeprefix(SERVICE_TARGET_PREFIX), params, token)
        self.requests.append(record)
        account = self.token_accounts.get(token or "", "sim")
        rules = self.host_rules.get(record.port)
        refusal = None
        if rules is not None:
            refusal = rules.refusal(record.body, self._token_kind(record), token_accepted=self._token_accepted(token))
        if refusal is not None:
            reply: Reply = refusal
        elif not self._token_accepted(token):
            reply = scripts.bearer_invalid()
        elif self.require_profile and not (isinstance(record.body, dict) and record.body.get("profileArn")):
            reply = scripts.profile_required()
        elif (limit := self._over_limit(record)) is not None:
            reply = limit
        else:
            reply = (
                self.services.invalid_model(record.body, record.access_token)
                or self.reasoning.check(record.body, self._reasoning_schema(record), account)
                or self._next_reply(record, account)
            )
        if isinstance(reply, ErrorReply):
            return web.Response(status=reply.status, body=reply.body, headers={**_request_id(), **reply.headers})
        if isinstance(reply, Hangup):
            self.aborts += 1
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError  # nothing to send: end the handler quietly
        closing = self.accounting.closing_frames(record.body, account, reply.steps) if self.usage_frames else []
        return await self._stream(request, reply.then(closing) if closing else reply)

    def enforce_limits(self) -> None:
        """From now on refuse bodies and histories over the limits q2api.testing.assumptions gives."""
        self.body_limit = SIMULATOR.number(assumptions.LIMIT_BODY_BYTES)
        self.history_cap = SIMULATOR.number(assumptions.LIMIT_HISTORY_MESSAGES)

    def _over_limit(self, record: RecordedRequest) -> ErrorReply | None:
        """The refusal of a body over `body_limit` or a history over `history_cap` (the simulator's own
        choice of answer for the history: no source shows one)."""
        if self.body_limit is not None and len(record.raw) > self.body_limit:
            reason = SIMULATOR.text(assumptions.LIMIT_BODY_REFUSAL)
            return scripts.http_error(
                400, "ValidationException", "Input content length exceeds threshold.", reason=reason
            )
        state = record.body.get("conversationState") if isinstance(record.body, dict) else None
        history = state.get("history") if isinstance(state, dict) else None
        if self.history_cap is not None and isinstance(history, list) and len(history) > self.history_cap:
            return scripts.improperly_formed()
        return None

    def _reasoning_schema(self, record: RecordedRequest) -> dict[str, Any] | None:
        try:
            model = record.body["conversationState"]["currentMessage"]["userInputMessage"].get("modelId")
        except (KeyError, TypeError, AttributeError):
            return None
        for entry in self.services.catalogue_for(record.access_token):
            if entry.get("modelId") == model:
                schema = entry.get("additionalModelRequestFieldsSchema")
                return schema if isinstance(schema, dict) else None
        return None

    def _token_kind(self, record: RecordedRequest) -> str | None:
        if any(name.lower() == "tokentype" and value.upper() == "API_KEY" for name, value in record.headers.items()):
            return "api_key"
        return self.token_kinds.get(record.access_token or "")

    def _token_accepted(self, access_token: str | None) -> bool:
        if access_token == KEY_WITHOUT_TOKEN_TYPE:
            return False
        if access_token in self.api_keys:
            return True
        return not self.check_tokens or access_token in self.valid_access_tokens

    def _next_reply(self, record: RecordedRequest, account: str = "sim") -> Reply:
        if self.replies:
            return self.replies.popleft()
        if self.responder is not None:
            chosen = self.responder(record)
            if chosen is not None:
                return chosen
        echo = scripts.echo_reply(record.body, usage=not self.usage_frames)  # one usage event per reply
        if wants_reasoning(record.body):
            said = scripts.current_user_text(record.body)[:120]
            thought = reasoning_frames(
                f"Reasoning about: {said}", account, fragments=self.reasoning.signature_fragments
            )
            return scripts.stream(echo.steps[:1], thought, echo.steps[1:])
        return echo

    async def _stream(self, request: web.Request, reply: StreamReply) -> web.StreamResponse:
        response = web.StreamResponse(
            status=200,
            headers={"Content-Type": "application/vnd.amazon.eventstream", **_request_id(), **reply.headers},
        )
        self.streams_started += 1
        try:
            if reply.headers_after:
                await asyncio.sleep(reply.headers_after)
            await response.prepare(request)
            loop = asyncio.get_running_loop()
            # Pauses are kept on an absolute schedule, so 100 pauses of 20 ms
            # take 2 s and not 2 s plus 100 scheduling delays.
            due = loop.time()
            for step in reply.steps:
                if isinstance(step, Send):
                    await response.write(step.data)
                    self.bytes_streamed += len(step.data)
                elif isinstance(step, Pause):
                    due = max(due, loop.time() - step.seconds) + step.seconds
                    await asyncio.sleep(due - loop.time())
                elif isinstance(step, Abort):
                    self.aborts += 1
                    if request.transport is not None:
                        request.transport.abort()
                    return response
            await response.write_eof()
        except (asyncio.CancelledError, ConnectionResetError):
            self.disconnects += 1
            raise
        self.streams_completed += 1
        return response

    # -- refresh endpoints ---------------------------------------------------------

    async def _refresh_request(self, request: web.Request) -> dict[str, Any]:
        """Record a refresh call, take the configured time over it, and return its JSON body."""
        record = await _record(request)
        self.refresh_requests.append(record)
        body = record.body if isinstance(record.body, dict) else {}
        if body.get("refreshToken") in self.retired_refresh_tokens:
            self.retired_refresh_uses += 1
        if self.refresh_delay:
            await asyncio.sleep(self.refresh_delay)
        return body

    def _device_call(
        self, answer: Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]
    ) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.Response:
            record = await _record(request)
            self.refresh_requests.append(record)
            return self._device_answer(*answer(record.body if isinstance(record.body, dict) else {}))

        return handle

    def _device_answer(self, status: int, document: dict[str, Any]) -> web.Response:
        headers = None if status == 200 else {"x-amzn-ErrorType": self.device.error_type(document)}
        return _json(document, status=status, headers=headers)

    async def _oidc_token(self, request: web.Request) -> web.Response:
        body = await self._refresh_request(request)
        if body.get("grantType") == DEVICE_CODE_GRANT:
            return self._device_answer(*self.device.token(body))
        failure = self.refresh_failure
        client = (body.get("clientId"), body.get("clientSecret"))
        registered = self.device.clients.get(str(client[0])) == client[1]
        if failure is None and self.oidc_client is not None and client != self.oidc_client and not registered:
            failure = "invalid_client"
        if failure is None and body.get("grantType") != "refresh_token":
            return _oidc_error(400, "unsupported_grant_type", "UnsupportedGrantTypeException")
        if failure is None and not self._refresh_token_valid(body.get("refreshToken")):
            failure = "invalid_grant"
        if failure == "invalid_client":
            return _oidc_error(401, "invalid_client", "InvalidClientException", "Client authentication failed")
        if failure == "invalid_grant":
            return _oidc_error(400, "invalid_grant", "InvalidGrantException", "Invalid refresh token provided")
        if failure is not None:
            return _oidc_error(500, "server_error", "InternalServerException")
        return _json(self._issue(str(body.get("refreshToken")), kiro=False))

    async def _kiro_refresh(self, request: web.Request) -> web.Response:
        body = await self._refresh_request(request)
        failure = self.refresh_failure
        if failure is None and not self._refresh_token_valid(body.get("refreshToken")):
            failure = "invalid_grant"
        if failure in ("invalid_grant", "invalid_client"):
            return _json({"message": "Invalid refresh token"}, status=401)
        if failure is not None:
            return _json({"message": "Internal error"}, status=500)
        return _json(self._issue(str(body.get("refreshToken")), kiro=True))

    def _refresh_token_valid(self, token: object) -> bool:
        if not isinstance(token, str) or not token:
            return False
        return self.valid_refresh_tokens is None or token in self.valid_refresh_tokens

    def _issue(self, old_refresh_token: str, *, kiro: bool) -> dict[str, Any]:
        access_token = self.issue_access_token()
        self.token_accounts[access_token] = old_refresh_token
        self.token_kinds[access_token] = "social" if kiro else "idc"
        document: dict[str, Any] = {
            "accessToken": access_token,
            "tokenType": "Bearer",
            "expiresIn": self.token_lifetime,
        }
        if self.rotate_refresh_tokens:
            new_refresh_token = f"sim-refresh-{next(self._serial)}"
            self.retired_refresh_tokens.add(old_refresh_token)
            if self.valid_refresh_tokens is not None:
                self.valid_refresh_tokens.discard(old_refresh_token)
                self.valid_refresh_tokens.add(new_refresh_token)
            document["refreshToken"] = new_refresh_token
        elif kiro:
            document["refreshToken"] = old_refresh_token
        if kiro:
            document["profileArn"] = self.kiro_profile_arn
        return document


class SimulationThread:
    """A simulator running on its own loop in a daemon thread."""

    def __init__(self, sim: SimulatedUpstream) -> None:
        self.sim = sim
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(sim.start())
            except BaseException as exc:  # pragma: no cover - reported to the starting thread
                failure.append(exc)
                ready.set()
                return
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(sim.stop())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="q2api-simulated-upstream", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]

    @property
    def url(self) -> str:
        return self.sim.url

    def env(self, auth_method: str = "idc") -> dict[str, str]:
        return self.sim.env(auth_method)

    def enqueue(self, *replies: Reply) -> None:
        self._loop.call_soon_threadsafe(self.sim.enqueue, *replies)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the simulator's loop and wait for its result (e.g. `add_host`)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    def revoke_access_token(self, token: str) -> None:
        """From now on Amazon Q refuses `token` (as when it expires), whatever its recorded lifetime."""
        self._loop.call_soon_threadsafe(self.sim.valid_access_tokens.discard, token)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> SimulationThread:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _local_port(request: web.Request) -> int:
    sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
    return sockname[1] if isinstance(sockname, tuple) else -1


async def _record(request: web.Request) -> RecordedRequest:
    raw = await request.read()
    try:
        body = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        body = None
    return RecordedRequest(request.path, dict(request.headers), body, raw, time.monotonic(), _local_port(request))


def _request_id() -> dict[str, str]:
    return {"x-amzn-requestid": str(uuid.uuid4())}


def _json(document: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(document), content_type="application/json", headers=headers)


def _oidc_error(status: int, error: str, error_type: str, description: str = "") -> web.Response:
    return _json(
        {"error": error, "error_description": description or error},
        status=status,
        headers={"x-amzn-ErrorType": f"{error_type}:http://internal.amazon.com/coral/com.amazonaws.sso.oidc/"},
    )
