"""The simulated Amazon Q upstream's GenerateAssistantResponse: what it answers, and how it writes the stream.

A call is judged first as the real service would: the rules of the host it reached
(q2api.testing.simulated_hosts), the bearer (`TokenEndpoints`), a required `profileArn`, the request
limits once `enforce_limits()` is on, the model against the account's catalogue and the reasoning
fields against its schema (q2api.testing.simulated_reasoning). A call that passes gets the next
queued reply script (`enqueue`, see q2api.testing.scripts), else `responder(request)`, else an echo
of the user's text (with signed reasoning first when the request asks for reasoning).

The reply is then written as the script says: its frames, its pauses (kept on an absolute schedule),
a dropped connection where it aborts. The counters (`streams_started`, `streams_completed`,
`disconnects`, `aborts`, `bytes_streamed`) let a test see that a client going away really closed the
upstream stream; `in_flight_by_account` and `peak_in_flight_by_account` count the replies streaming
at once per account (the refresh token that issued the bearer), where an account's in-flight cap is
judged. With `usage_frames` every streamed reply ends with the closing frames of
q2api.testing.simulated_accounting.

`GenerateAssistantResponse` is a base of `SimulatedUpstream`, whose attributes the tests script
(`sim.responder = …`, `sim.requests`).
"""

from __future__ import annotations

import asyncio
import collections
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from q2api.testing import assumptions, scripts
from q2api.testing.assumptions import SIMULATOR
from q2api.testing.recorded_requests import RecordedRequest, record_request
from q2api.testing.scripts import Abort, ErrorReply, Hangup, Hold, Pause, Reply, Send, StreamReply
from q2api.testing.simulated_accounting import SimulatedAccounting
from q2api.testing.simulated_hosts import HostRules
from q2api.testing.simulated_reasoning import SimulatedReasoning, reasoning_frames, wants_reasoning
from q2api.testing.simulated_services import AWS_JSON, SERVICE_TARGET_PREFIX, SimulatedServices, bearer_of

Responder = Callable[[RecordedRequest], "Reply | None"]


class GenerateAssistantResponse:
    # Kept by SimulatedUpstream and its other parts: the services that answer the awsJson calls sent to
    # the same path, native reasoning, the closing frames, the rules of each extra host (by local port),
    # the client connections seen, and the token service's account of each bearer.
    services: SimulatedServices
    reasoning: SimulatedReasoning
    accounting: SimulatedAccounting
    host_rules: dict[int, HostRules]
    connections_seen: set[tuple[Any, ...]]
    api_keys: set[str]
    token_accounts: dict[str, str]

    if TYPE_CHECKING:  # the token service's checks (TokenEndpoints)

        def _token_accepted(self, access_token: str | None) -> bool: ...

        def _token_kind(self, record: RecordedRequest) -> str | None: ...

    def __init__(self) -> None:
        self.responder: Responder | None = None
        self.replies: collections.deque[Reply] = collections.deque()
        self.usage_frames = False  # end every streamed reply with usage, credits and context frames
        # Answer a GenerateAssistantResponse without `profileArn` as a host that needs one does.
        self.require_profile = False
        # The request limits (docs/protocol.md#limits): None = not enforced, the default, since tests model
        # conversations beyond them to show the gateway sends them unchanged. `enforce_limits()` plays
        # those of q2api.testing.assumptions.
        self.body_limit: int | None = None  # bytes of the whole body
        self.history_cap: int | None = None  # history messages
        self.requests: list[RecordedRequest] = []  # GenerateAssistantResponse calls
        self.streams_started = 0
        self.streams_completed = 0
        self.disconnects = 0  # the client went away before the reply ended
        self.bytes_streamed = 0  # reply body bytes written, over all streams
        self.aborts = 0  # the simulator dropped the connection on purpose (an Abort step)
        # Replies streaming now, and the most streaming at once, per account (the refresh token that
        # issued the call's bearer): what an account's in-flight cap is judged by.
        self.in_flight_by_account: collections.Counter[str] = collections.Counter()
        self.peak_in_flight_by_account: collections.Counter[str] = collections.Counter()

    def enqueue(self, *replies: Reply) -> None:
        """Queue replies; each GenerateAssistantResponse call takes the next one."""
        self.replies.extend(replies)

    def enforce_limits(self) -> None:
        """From now on refuse bodies and histories over the limits q2api.testing.assumptions gives."""
        self.body_limit = SIMULATOR.number(assumptions.LIMIT_BODY_BYTES)
        self.history_cap = SIMULATOR.number(assumptions.LIMIT_HISTORY_MESSAGES)

    @property
    def active_streams(self) -> int:
        return self.streams_started - self.streams_completed - self.disconnects - self.aborts

    # -- the answer -------------------------------------------------------------------

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        record = await record_request(request)
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
        return await self._stream(request, reply.then(closing) if closing else reply, account)

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

    # -- the stream -------------------------------------------------------------------

    async def _stream(self, request: web.Request, reply: StreamReply, account: str = "sim") -> web.StreamResponse:
        response = web.StreamResponse(
            status=200,
            headers={"Content-Type": "application/vnd.amazon.eventstream", **_request_id(), **reply.headers},
        )
        self.streams_started += 1
        self.in_flight_by_account[account] += 1
        self.peak_in_flight_by_account[account] = max(
            self.peak_in_flight_by_account[account], self.in_flight_by_account[account]
        )
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
                elif isinstance(step, Hold):
                    await step.released.wait()
                elif isinstance(step, Abort):
                    self.aborts += 1
                    if request.transport is not None:
                        request.transport.abort()
                    return response
            await response.write_eof()
        except (asyncio.CancelledError, ConnectionResetError):
            self.disconnects += 1
            raise
        finally:
            self.in_flight_by_account[account] -= 1
        self.streams_completed += 1
        return response


def _request_id() -> dict[str, str]:
    return {"x-amzn-requestid": str(uuid.uuid4())}
