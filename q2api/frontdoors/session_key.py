"""Which conversation a request belongs to, for session affinity. Pure.

A conversation's turns go to the account that served its previous turn (docs/accounts.md,
session affinity): that account holds its reasoning signatures and its prompt cache. The
conversation is known by the first of these the request carries:

1. Claude Code's `X-Claude-Code-Session-Id` header (with `x-claude-code-agent-id` when a subagent
   sends it: each subagent is a conversation of its own, with its own history and signatures, so a
   burst of parallel subagents neither piles onto one account nor moves the main conversation);
2. Codex's `session-id` / `thread-id` headers, then its body's `prompt_cache_key`
   (q2api.frontdoors.responses.conversation_key);
3. a Responses `previous_response_id` chain: its first response's id (a turn that starts a
   stored chain names itself, so that its continuations find it);
4. the request's `metadata.user_id` (Claude Code's holds its session);
5. an explicit `x-q2api-session` header;
6. else a digest of the system prompt and the first user message's text: what every turn of one
   conversation resends unchanged (cache marks, images and tool blocks are left out of it: they
   move or differ between turns). Many unrelated requests open alike (one-shot API calls with one
   prompt), so the first turn of such a conversation (`SessionKey.first_turn`: no assistant message
   yet) is not held to an account: it goes where the pool sends it, and its later turns follow it.

The key is a digest of its source and value, never the value: pins are stored in Redis or the
database, and the raw ids and prompt text must not be.

    key = session_key(request.headers, call.request, call.session)
    key.digest  # "9f2c…" (32 hex digits)
    key.source  # "claude-code-session": where it was read (a metric label)
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from q2api.anthropic.types import MessagesRequest, TextBlock
from q2api.frontdoors.responses.conversation_key import ConversationKey, conversation_key

SessionSource = Literal[
    "claude-code-session",
    "session-id",
    "thread-id",
    "prompt_cache_key",
    "response-chain",
    "metadata.user_id",
    "x-q2api-session",
    "prompt-digest",
]
CLAUDE_CODE_SESSION_HEADER = "x-claude-code-session-id"
CLAUDE_CODE_AGENT_HEADER = "x-claude-code-agent-id"
EXPLICIT_SESSION_HEADER = "x-q2api-session"
MAX_VALUE_CHARS = 1024  # a longer header or user id is not a conversation id: left out
_DIGEST_HEX = 32  # 128 bits: no two conversations share a key by chance


@dataclass(frozen=True, slots=True)
class DoorSession:
    """What a door knows of the conversation beyond its Claude request."""

    codex: ConversationKey | None = None  # Codex's session-id / thread-id / prompt_cache_key
    chain_root: str | None = None  # the first response of the Responses chain this turn belongs to


@dataclass(frozen=True, slots=True)
class SessionKey:
    digest: str
    source: SessionSource
    first_turn: bool = False  # a conversation known by its opening alone, at its first turn


def session_key(headers: Mapping[str, str], request: MessagesRequest, door: DoorSession | None = None) -> SessionKey:
    """The request's conversation key, from the first source above that it carries."""
    value = _usable(headers.get(CLAUDE_CODE_SESSION_HEADER))
    if value is not None:
        agent = _usable(headers.get(CLAUDE_CODE_AGENT_HEADER))
        return _key("claude-code-session", value if agent is None else f"{value}\0agent\0{agent}")
    codex = door.codex if door is not None and door.codex is not None else conversation_key(headers, None)
    if codex is not None:
        return _key(codex.source, codex.value)
    if door is not None and door.chain_root:
        return _key("response-chain", door.chain_root)
    user_id = (request.metadata or {}).get("user_id")
    value = _usable(user_id) if isinstance(user_id, str) else None
    if value is not None:
        return _key("metadata.user_id", value)
    value = _usable(headers.get(EXPLICIT_SESSION_HEADER))
    if value is not None:
        return _key("x-q2api-session", value)
    first_turn = not any(message.role == "assistant" for message in request.messages)
    return _key("prompt-digest", _opening_text(request), first_turn)


def _key(source: SessionSource, value: str, first_turn: bool = False) -> SessionKey:
    digest = hashlib.sha256(f"{source}\0{value}".encode("utf-8", "surrogatepass")).hexdigest()
    return SessionKey(digest[:_DIGEST_HEX], source, first_turn)


def _usable(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value if value and len(value) <= MAX_VALUE_CHARS else None


def _opening_text(request: MessagesRequest) -> str:
    """The system prompt and the first user message's text, as one string."""
    parts = ["system", *_texts(request.system)]
    first_user = next((message for message in request.messages if message.role == "user"), None)
    parts.append("user")
    if first_user is not None:
        parts.extend(_texts(first_user.content))
    return "\0".join(parts)


def _texts(content: object) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [block.text for block in content if isinstance(block, TextBlock)]
    return []
