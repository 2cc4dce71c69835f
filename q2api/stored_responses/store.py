"""Stored Responses API conversations: what `previous_response_id` continues, behind one small protocol.

A stored response is one row: its id, the owner it belongs to (an opaque string the server
derives from the client key; another owner never sees it), the response it continued, when it
expires, and the JSON of its input items and of the `response` object itself. A conversation is
read by walking `previous_response_id` back to its first response: one row per turn, written
once, so a long conversation costs each turn only its own items; the walk is one query (a recursive
one), not one per earlier response.

`SqlResponseStore` (sql_store.py) implements `ResponseStore` in the store's database (q2api.store),
the SQLite file or a shared one, beside the accounts (the `q2api_responses` table, table.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

# A conversation longer than this many responses is refused rather than walked forever (a cycle
# cannot be written: an id is new when it is stored; the bound is for the store's sake).
MAX_CONVERSATION_RESPONSES = 10_000
# Expired rows are removed by the writes, at most once per this many seconds per process.
PURGE_INTERVAL = 600.0


@dataclass(frozen=True, slots=True)
class StoredResponse:
    id: str
    owner: str
    previous_response_id: str | None
    created_at: float
    expires_at: float
    model: str  # as the client named it: a continuation that names none inherits it
    input_items: list[dict[str, Any]]  # the request's `input`, each item with an id
    response: dict[str, Any]  # the `response` object as the client got it

    @property
    def items(self) -> list[dict[str, Any]]:
        """The conversation's items this response adds: its input, then its output."""
        return [*self.input_items, *self.response.get("output", ())]

    def record(self) -> str:
        """The JSON column: input items and response."""
        return orjson.dumps({"input_items": self.input_items, "response": self.response}).decode()


def stored_response(
    *,
    response_id: str,
    owner: str,
    previous_response_id: str | None,
    created_at: float,
    expires_at: float,
    model: str,
    record: bytes | str,
) -> StoredResponse:
    """A row back as a StoredResponse."""
    document = orjson.loads(record)
    return StoredResponse(
        response_id,
        owner,
        previous_response_id,
        created_at,
        expires_at,
        model,
        document["input_items"],
        document["response"],
    )


class ResponseStore(Protocol):
    async def save(self, response: StoredResponse) -> None:
        """Keep `response` until its `expires_at` (also drops expired rows now and then)."""
        ...

    async def get(self, response_id: str, owner: str) -> StoredResponse | None:
        """The response if it exists, belongs to `owner` and has not expired; else None."""
        ...

    async def chain(self, response_id: str, owner: str, limit: int) -> list[StoredResponse]:
        """`response_id` and the responses it continues, newest first, in one read: at most `limit`,
        and up to the first that is missing (never stored, deleted, expired, or not `owner`'s)."""
        ...

    async def delete(self, response_id: str, owner: str) -> bool:
        """Remove the response; False when there was none of `owner`'s to remove."""
        ...

    async def purge_expired(self) -> int:
        """Remove every expired response now; how many went."""
        ...


@dataclass(frozen=True, slots=True)
class Conversation:
    """The items a continuation starts from, oldest first, and the model its last response used."""

    items: list[dict[str, Any]]
    model: str
    root_id: str | None = None  # the chain's first response (session affinity keys on it)


class ConversationGap(Exception):
    """A response of the conversation is missing (expired, deleted, or not the caller's)."""

    def __init__(self, response_id: str, missing_id: str) -> None:
        self.response_id = response_id
        self.missing_id = missing_id
        if missing_id == response_id:
            message = f"Previous response with id {response_id!r} not found."
        else:
            message = (
                f"Previous response with id {response_id!r} continues {missing_id!r}, which is no longer stored "
                "(expired or deleted): the conversation cannot be continued whole; start it again"
            )
        super().__init__(message)


async def load_conversation(store: ResponseStore, response_id: str, owner: str) -> Conversation:
    """Walk `previous_response_id` back from `response_id` (one read); raises ConversationGap for a
    missing link, or for a conversation longer than MAX_CONVERSATION_RESPONSES."""
    chain = await store.chain(response_id, owner, MAX_CONVERSATION_RESPONSES)
    if not chain:
        raise ConversationGap(response_id, response_id)
    earliest = chain[-1].previous_response_id
    if earliest is not None:  # the walk stopped at a missing link, or at the bound
        raise ConversationGap(response_id, earliest)
    items = [item for stored in reversed(chain) for item in stored.items]
    return Conversation(items, chain[0].model, root_id=chain[-1].id)


class PurgeClock:
    """When a store's writes should next drop expired rows (one per store object, never module state)."""

    def __init__(self, interval: float = PURGE_INTERVAL) -> None:
        self._interval = interval
        self._next = 0.0

    def due(self) -> bool:
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + self._interval
        return True


def items_page(
    items: Sequence[dict[str, Any]], *, limit: int, order: str, after: str | None, before: str | None
) -> tuple[list[dict[str, Any]], bool]:
    """One page of `input_items` (cursor ids `after` / `before` in the listed order); (page, has_more)."""
    ordered = list(items) if order == "asc" else list(reversed(items))
    ids = [item.get("id") for item in ordered]
    start, end = 0, len(ordered)
    if after is not None and after in ids:
        start = ids.index(after) + 1
    if before is not None and before in ids:
        end = ids.index(before)
    window = ordered[start:end]
    return window[:limit], len(window) > limit
