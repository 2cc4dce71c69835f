"""The Responses API's routes: the `before` / `after` hooks of `POST /v1/responses` (its door in
q2api.server.doors), and the stored responses.

    POST   /v1/responses                      a response (stream or JSON), stored unless `store: false`
    GET    /v1/responses/{id}                 the stored `response` object
    DELETE /v1/responses/{id}                 removes it
    GET    /v1/responses/{id}/input_items     its input items, a page at a time

The edge work the relay cannot do is done in the hooks: the conversation `previous_response_id` names is
loaded from the store before the door builds the Claude request (a missing one is a 404), and the
finished response is stored before its last byte is sent, so that a client continuing it at once
finds it, on any replica of a shared store. A store that fails degrades: the reply still goes
out, logged; only the continuation would then miss it.

Each response belongs to the client key that created it (`response_owner`); another key is told
404, exactly as for an id that never existed.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loguru import logger
from starlette.requests import Request
from starlette.responses import Response

from q2api.frontdoors.door import DoorCall
from q2api.frontdoors.openai_shared import ChatError
from q2api.frontdoors.responses.conversation_key import ConversationKey, conversation_key
from q2api.frontdoors.responses.door import ResponsesCall, ResponsesDoor, read_responses_request
from q2api.frontdoors.responses.framing import SSE, Framing
from q2api.openai import responses_shapes as shapes
from q2api.openai.errors import InvalidChatRequest, OpenAIError
from q2api.openai.responses_types import ResponsesRequest
from q2api.server.admission import admit
from q2api.server.edge import json_response, store_unavailable
from q2api.server.gateway import gateway_of
from q2api.server.lifecycle.tenancy import Caller
from q2api.store.errors import STORE_ERRORS
from q2api.stored_responses.store import (
    Conversation,
    ConversationGap,
    ResponseStore,
    StoredResponse,
    items_page,
    load_conversation,
)

OPEN_GATEWAY_OWNER = "-"  # with no client keys configured, every client is one owner
_OWNER_SALT = b"q2api responses owner\0"
_PAGE_LIMIT = range(1, 101)


def response_owner(client_key: str | None) -> str:
    """Who a response belongs to: an opaque string per client key (a hash, never the key itself).

    The one place the owner is derived: client keys kept in the store with labels (tenants) will
    change what goes in, not who calls this.
    """
    if client_key is None:
        return OPEN_GATEWAY_OWNER
    return hashlib.sha256(_OWNER_SALT + client_key.encode()).hexdigest()


def _not_found(response_id: str, param: str | None = None) -> ChatError:
    return ChatError(
        OpenAIError(
            404,
            f"Response with id {response_id!r} not found.",
            param=param,
            code="response_not_found" if param is None else "previous_response_not_found",
        )
    )


def _store_unavailable(error: Exception) -> ChatError:
    logger.warning(f"responses store failed: {type(error).__name__}: {error}")
    return store_unavailable("the response store is unavailable; try again shortly", retry_after=2)


async def _owner(request: Request) -> str:
    """The caller's owner string, once its Host and client key are admitted (403 / 401 otherwise)."""
    return response_owner((await admit(request)).presented)


# ------------------------------------------------------------ POST /v1/responses: the door's hooks


@dataclass(frozen=True, slots=True)
class Turn:
    """What the transport says of a request besides its body: how its stream is framed, the
    conversations it remembers (the WebSocket's last response, stored or not), and whether it is
    answered (`generate: false`: prepared only). HTTP: SSE, nothing remembered, answered."""

    framing: Framing = SSE
    remembered: Mapping[str, Conversation] = field(default_factory=dict)
    generate: bool = True


HTTP = Turn()


async def before(request: Request, caller: Caller, body: bytes, turn: Turn = HTTP) -> ResponsesDoor:
    """The Responses door's `before` hook: the request's own door, holding the conversation its
    `previous_response_id` continues (one the transport remembers, else the store's; a 404 naming
    the field without it)."""
    parsed = read_responses_request(body)
    key = conversation_key(request.headers, parsed.prompt_cache_key)
    return await _door_for(gateway_of(request).responses, parsed, response_owner(caller.presented), key, turn)


async def after(request: Request, caller: Caller, call: DoorCall, answer: object) -> None:
    """The Responses door's `after` hook, awaited with the call and its finished response once the
    reply succeeded and before its last byte: the response stored (unless `store: false`), so that
    a client continuing it at once finds it."""
    assert isinstance(call, ResponsesCall) and isinstance(answer, dict)  # the call the door `before` returned read
    gateway = gateway_of(request)
    if call.parsed.store is not False:
        owner = response_owner(caller.presented)
        await _store(gateway.responses, call, answer, owner, gateway.settings.responses_ttl_seconds)


async def _door_for(
    store: ResponseStore, parsed: ResponsesRequest, owner: str, key: ConversationKey | None, turn: Turn
) -> ResponsesDoor:
    """The door for `parsed`, with the conversation its `previous_response_id` continues: one
    the transport remembers, else the store's (a 404 naming the field when it has none)."""
    framing, generate = turn.framing, turn.generate
    if not parsed.previous_response_id:
        return ResponsesDoor(parsed, framing=framing, conversation_key=key, generate=generate)
    conversation = turn.remembered.get(parsed.previous_response_id)
    if conversation is None:
        try:
            conversation = await load_conversation(store, parsed.previous_response_id, owner)
        except ConversationGap as gap:
            raise ChatError(
                OpenAIError(404, str(gap), param="previous_response_id", code="previous_response_not_found")
            ) from None
        except STORE_ERRORS as exc:
            raise _store_unavailable(exc) from None
    return ResponsesDoor(
        parsed,
        conversation.items,
        previous_model=conversation.model,
        chain_root=conversation.root_id,
        framing=framing,
        conversation_key=key,
        generate=generate,
    )


async def _store(
    store: ResponseStore, call: ResponsesCall, outcome: dict[str, Any], owner: str, ttl_seconds: float
) -> None:
    now = time.time()
    record = StoredResponse(
        id=outcome["id"],
        owner=owner,
        previous_response_id=call.parsed.previous_response_id,
        created_at=now,
        expires_at=now + ttl_seconds,
        model=outcome["model"],
        input_items=call.translated.items,
        response=outcome,
    )
    try:
        await store.save(record)
    except STORE_ERRORS as exc:
        logger.warning(
            f"response {outcome['id']} was answered but not stored ({type(exc).__name__}: {exc}); "
            "previous_response_id cannot continue it"
        )


# ------------------------------------------------------------ the stored responses


async def retrieve(request: Request) -> Response:
    stored = await _find(request)
    if request.query_params.get("stream") in ("true", "1"):
        raise ChatError(InvalidChatRequest("stream", "a stored response cannot be streamed again"))
    return json_response(stored.response)


async def delete(request: Request) -> Response:
    owner = await _owner(request)
    response_id = request.path_params["response_id"]
    try:
        deleted = await gateway_of(request).responses.delete(response_id, owner)
    except STORE_ERRORS as exc:
        raise _store_unavailable(exc) from None
    if not deleted:
        raise _not_found(response_id)
    return json_response(shapes.deleted(response_id))


async def input_items(request: Request) -> Response:
    stored = await _find(request)
    query = request.query_params
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ChatError(InvalidChatRequest("order", "must be 'asc' or 'desc'"))
    try:
        limit = int(query.get("limit", "20"))
    except ValueError:
        limit = 0
    if limit not in _PAGE_LIMIT:
        raise ChatError(InvalidChatRequest("limit", "must be an integer from 1 to 100"))
    page, has_more = items_page(
        stored.input_items, limit=limit, order=order, after=query.get("after"), before=query.get("before")
    )
    return json_response(shapes.item_list(page, has_more=has_more))


async def _find(request: Request) -> StoredResponse:
    owner = await _owner(request)
    response_id = request.path_params["response_id"]
    try:
        stored = await gateway_of(request).responses.get(response_id, owner)
    except STORE_ERRORS as exc:
        raise _store_unavailable(exc) from None
    if stored is None:
        raise _not_found(response_id)
    return stored
