"""What the account choice asks of session affinity, for one turn (q2api.accounts.session_affinity answers).

A turn may name the account its conversation is pinned to. The account choice takes that account
while it is eligible — in the pool (enabled), not resting, its catalogue has the model, and it has a
free in-flight slot within a short wait — and otherwise says why it took another one, as one of the
reasons below (a metric label and the `session moved` line's `why`).

Amazon Q accepts a history reasoning signature only from the account that made it
(THINKING_SIGNATURE_INVALID otherwise: docs/protocol.md#native-thinking). So when a turn moves, the
history it carries is foreign to its new account: the body sent there leaves out the reasoning of
those messages (`without_reasoning_before`), as the one retry after a refused signature does
(q2api.server.lifecycle.reply), without spending a refused call on it. The pin remembers how many history
messages are foreign (`foreign_history`), so that later turns on the new account leave out the same
ones and keep the reasoning the new account signed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

MoveReason = Literal["disabled", "needs_login", "resting", "model", "busy", "failed"]
# How long a turn waits for a slot on its pinned account before it moves (its reply there would
# lose the cache and the signatures; waiting seconds for them is worth it, a minute is not).
PINNED_SLOT_WAIT = 3.0


@dataclass(frozen=True, slots=True)
class PinnedAccount:
    account_id: str
    foreign_history: int = 0  # the first history messages, served by another account before a move


class TurnAffinity(Protocol):
    async def pinned(self) -> PinnedAccount | None:
        """The account this turn's conversation is pinned to (None: none, or affinity is off)."""
        ...

    def served(self, account_id: str, label: str, moved_because: MoveReason | None, foreign_history: int) -> None:
        """The turn's reply opened on `account_id`; `moved_because`: why not on the pinned account;
        `foreign_history`: the history messages whose reasoning that account did not make."""
        ...


def without_reasoning_before(document: dict[str, Any], count: int) -> dict[str, Any]:
    """`document` (a GenerateAssistantResponse body) with no `reasoningContent` in its first `count`
    history messages. The messages are copied, never changed (they are shared with conversion
    checkpoints)."""
    state = document.get("conversationState")
    if not count or not isinstance(state, dict) or not state.get("history"):
        return document
    history = state["history"]
    stripped = [_without_reasoning(message) if index < count else message for index, message in enumerate(history)]
    return {**document, "conversationState": {**state, "history": stripped}}


def _without_reasoning(message: Any) -> Any:
    reply = message.get("assistantResponseMessage") if isinstance(message, dict) else None
    if not isinstance(reply, dict) or "reasoningContent" not in reply:
        return message
    return {**message, "assistantResponseMessage": {k: v for k, v in reply.items() if k != "reasoningContent"}}
