"""The front doors, each declared once, and the one tuple of them (`DOORS`) the app is built from.

A door is one client protocol on the one relay (q2api.frontdoors.door): its routes, the paths whose
errors its clients read (in its envelope: routing errors and gateway bugs too), the fix a client
with `/v1` twice in its path is told, and, for a door with state, its hooks:

- `before(request, caller, body, turn)` → the request's own front door (the Responses door loads
  the conversation `previous_response_id` continues there, a 404 naming the field without it;
  `turn` is what the transport says besides the body: its framing, the conversation a WebSocket
  remembers);
- `after(request, caller, call, answer)`, awaited with the call the request's door read and its
  finished answer once the reply succeeded and before its last byte is sent (the Responses door
  stores the response there, so that a client continuing it at once finds it).

They are the one way a door with state loads and stores it, over HTTP (`relayed`) and over the
Responses WebSocket (q2api.server.responses_websocket) alike.

Everything else that names the doors is built from `DOORS`: the app's routes and error envelopes
(q2api.server.app), the routes whose requests the relay logs itself, the route labels of the
request metrics (q2api.server.metrics), the doors a capture is replayed through
(q2api.server.captures.replaying).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.token_count import estimate_request_tokens
from q2api.frontdoors.chat.door import CHAT_DOOR, CHAT_ROUTE
from q2api.frontdoors.claude import CLAUDE_DOOR
from q2api.frontdoors.claude.reading import read_count_tokens
from q2api.frontdoors.door import DoorCall, FrontDoor
from q2api.frontdoors.responses.door import RESPONSES_DOOR, RESPONSES_ROUTE
from q2api.server import responses_routes, responses_websocket
from q2api.server.admission import admit
from q2api.server.cross_site import require_json
from q2api.server.edge import SinkResponse, json_response, read_body
from q2api.server.endpoints import SHELL_ROUTES
from q2api.server.gateway import gateway_of
from q2api.server.lifecycle.sink import Sink
from q2api.server.lifecycle.tenancy import Caller, Tenancy
from q2api.server.metrics import OTHER_ROUTE
from q2api.server.responses_routes import HTTP, Turn

# The request's own door, read from its body before the relay reads it (a door with state).
Before = Callable[[Request, Caller, bytes, Turn], Awaitable[FrontDoor]]
# Awaited with the call and its finished answer once the reply succeeded, before its last byte is sent.
After = Callable[[Request, Caller, DoorCall, object], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Door:
    front: FrontDoor  # its reader and error renderer (`front.route`: the POST route the relay serves)
    routes: tuple[BaseRoute, ...]  # every route of the door, the relayed POST first
    error_paths: tuple[str, ...]  # path prefixes whose errors are written in this door's envelope
    base_url_fix: str  # what a client whose path has /v1 twice should set its base URL to
    before: Before | None = None
    after: After | None = None


async def relayed(request: Request, door: Door) -> Response:
    """A door's POST: admitted, its body read, then relayed; refused at the edge, it still gets its
    one log line, like every other request."""
    request_id = request.state.request_id  # given by RequestIdMiddleware
    gateway = gateway_of(request)
    relay = gateway.relay
    caller = None
    try:
        caller = await admit(request)
        require_json(request)
        body = await read_body(request, gateway.settings.max_body_bytes)
        front = await door.before(request, caller, body, HTTP) if door.before is not None else door.front
    except AnthropicError as error:
        return relay.refuse(request_id, error, door.front, caller)
    after = partial(door.after, request, caller) if door.after is not None and caller is not None else None

    async def answer(sink: Sink) -> None:
        await relay.handle(
            body,
            request_id,
            front,
            disconnected=request.receive,
            sink=sink,
            headers=request.headers.items(),
            after=after,
            caller=caller,
        )

    return SinkResponse(answer)


# ------------------------------------------------------------ the Claude Messages door


async def messages(request: Request) -> Response:
    return await relayed(request, CLAUDE)


async def count_tokens(request: Request) -> Response:
    caller = await admit(request)
    require_json(request)
    body = await read_body(request, gateway_of(request).settings.max_body_bytes)
    parsed = read_count_tokens(body)
    # A store key may count tokens only for its own models; counting costs no upstream call, so
    # it is held to no rate (Claude Code calls it many times per turn).
    Tenancy.check_model(caller, parsed.model)
    # Without Amazon Q's hidden prompt: Claude Code sums many count_tokens calls per conversation.
    return json_response({"input_tokens": estimate_request_tokens(parsed, include_upstream_prompt=False)})


CLAUDE = Door(
    front=CLAUDE_DOOR,
    routes=(
        Route(CLAUDE_DOOR.route, messages, methods=["POST"]),
        Route(CLAUDE_DOOR.route + "/count_tokens", count_tokens, methods=["POST"]),
    ),
    error_paths=("/",),  # every path not another door's: the Anthropic envelope is the default
    base_url_fix="a Claude client's base URL has no /v1 (ANTHROPIC_BASE_URL=http://HOST:PORT): the client adds it",
)

# ------------------------------------------------------------ the OpenAI doors

_OPENAI_BASE_URL_FIX = "an OpenAI client's base URL ends in a single /v1 (OPENAI_BASE_URL=http://HOST:PORT/v1)"


async def chat_completions(request: Request) -> Response:
    return await relayed(request, CHAT)


CHAT = Door(
    front=CHAT_DOOR,
    routes=(Route(CHAT_ROUTE, chat_completions, methods=["POST"]),),
    error_paths=("/v1/chat/",),  # where OpenAI clients are: their errors use the OpenAI envelope
    base_url_fix=_OPENAI_BASE_URL_FIX,
)


async def create_response(request: Request) -> Response:
    return await relayed(request, RESPONSES)


async def responses_socket(websocket: WebSocket) -> None:
    await responses_websocket.serve(websocket, RESPONSES)


RESPONSES = Door(
    front=RESPONSES_DOOR,
    routes=(
        Route(RESPONSES_ROUTE, create_response, methods=["POST"]),
        WebSocketRoute(RESPONSES_ROUTE, responses_socket),
        Route(RESPONSES_ROUTE + "/{response_id}", responses_routes.retrieve, methods=["GET"]),
        Route(RESPONSES_ROUTE + "/{response_id}", responses_routes.delete, methods=["DELETE"]),
        Route(RESPONSES_ROUTE + "/{response_id}/input_items", responses_routes.input_items, methods=["GET"]),
    ),
    error_paths=(RESPONSES_ROUTE,),
    base_url_fix=_OPENAI_BASE_URL_FIX,
    before=responses_routes.before,
    after=responses_routes.after,
)

# The one tuple of doors; the default door (whose envelope a path no other door claims gets) last.
DOORS: tuple[Door, ...] = (CHAT, RESPONSES, CLAUDE)

# ------------------------------------------------------------ built from DOORS

# The doors' POST routes: the relay writes their requests' log lines and metrics itself
# (q2api.server.lifecycle.exchange_log).
SELF_LOGGED = frozenset(("POST", door.front.route) for door in DOORS)
# The replayable doors, by the route a capture names (q2api.server.captures.replaying).
FRONT_DOORS: dict[str, FrontDoor] = {door.front.route: door.front for door in DOORS}


def door_of_path(path: str) -> Door:
    """The door whose clients a path's errors are for."""
    return next(door for door in DOORS if path.startswith(door.error_paths))


def routes() -> list[BaseRoute]:
    """The doors' routes, then the others."""
    return [*(route for door in DOORS for route in door.routes), *(route for route, _ in SHELL_ROUTES)]


class RouteLabels:
    """The route a request is counted under in the metrics: its route's path, for the routes counted
    (every door's, and the shell's marked so); any other path counts as "other", so that a scanner
    probing random paths cannot create unbounded series. A path with parameters is counted under its
    template, the parameters named `{id}` (`/v1/responses/{id}`)."""

    def __init__(self, counted: Iterable[BaseRoute]) -> None:
        self._fixed: dict[str, str] = {}
        self._templates: list[tuple[Route | WebSocketRoute, str]] = []
        for route in counted:
            assert isinstance(route, (Route, WebSocketRoute))
            if route.param_convertors:
                label = route.path_format
                for name in route.param_convertors:
                    label = label.replace("{" + name + "}", "{id}")
                self._templates.append((route, label))
            else:
                self._fixed[route.path] = route.path

    @property
    def labels(self) -> frozenset[str]:
        return frozenset({*self._fixed.values(), *(label for _, label in self._templates)})

    def __call__(self, path: str) -> str:
        label = self._fixed.get(path)
        if label is not None:
            return label
        for route, template in self._templates:
            if route.path_regex.match(path):
                return template
        return OTHER_ROUTE


ROUTE_LABELS = RouteLabels(
    [*(route for door in DOORS for route in door.routes), *(route for route, counted in SHELL_ROUTES if counted)]
)
