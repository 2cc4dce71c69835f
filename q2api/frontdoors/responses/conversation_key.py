"""Which conversation a Responses request belongs to, as Codex says it. Pure.

Codex names its conversation three times on every turn: the `session-id` and `thread-id` headers
(HTTP, and the WebSocket's handshake) and the body's `prompt_cache_key`, all the thread's id
(codex-rs `requests/headers.rs`, measured from 0.171.0: docs/clients.md). A turn of one thread
served by the account that served the last one keeps that account's prompt cache and its
reasoning signatures (docs/protocol.md), so this key is what session affinity pins to an
account. It is read once, here, and carried on the call (`ResponsesCall.conversation_key`); the
gateway does nothing else with it.

    key = conversation_key(request.headers, parsed.prompt_cache_key)
    key.value   # "01a24a1f-d9e4-7730-b675-fcf0d4d779ab"
    key.source  # "session-id": where it was read

The headers come first (a client sends them for the conversation; `prompt_cache_key` is, to
OpenAI, only a caching hint that other clients may set per user). A value is the client's own
text: it is kept only when it is short, printable ASCII, so that it can be logged and used as a
key as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

KeySource = Literal["session-id", "thread-id", "prompt_cache_key"]
CONVERSATION_HEADERS: tuple[KeySource, ...] = ("session-id", "thread-id")
MAX_KEY_CHARS = 256  # a Codex thread id is a 36-character UUID


@dataclass(frozen=True, slots=True)
class ConversationKey:
    value: str
    source: KeySource


def conversation_key(headers: Mapping[str, str], prompt_cache_key: str | None) -> ConversationKey | None:
    """The request's conversation key, from the first usable of `session-id`, `thread-id` and
    `prompt_cache_key`; None when it carries none."""
    for name in CONVERSATION_HEADERS:
        value = _usable(headers.get(name))
        if value is not None:
            return ConversationKey(value, name)
    value = _usable(prompt_cache_key)
    return ConversationKey(value, "prompt_cache_key") if value is not None else None


def _usable(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > MAX_KEY_CHARS or not value.isascii() or not value.isprintable():
        return None
    return value
