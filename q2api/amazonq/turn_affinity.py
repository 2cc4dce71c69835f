"""What the account choice asks of session affinity, for one turn (q2api.accounts.session_affinity answers).

A turn may name the account its conversation is pinned to. The account choice takes that account
while it is eligible — in the pool (enabled), not resting, its catalogue has the model, and it has a
free in-flight slot within a short wait — and otherwise says why it took another one, as one of the
reasons below (a metric label and the `session moved` line's `why`).
"""

from __future__ import annotations

from typing import Literal, Protocol

MoveReason = Literal["disabled", "needs_login", "resting", "model", "busy", "failed"]
# How long a turn waits for a slot on its pinned account before it moves (its reply there would
# lose the cache and the signatures; waiting seconds for them is worth it, a minute is not).
PINNED_SLOT_WAIT = 3.0


class TurnAffinity(Protocol):
    async def pinned_account(self) -> str | None:
        """The account this turn's conversation is pinned to (None: none, or affinity is off)."""
        ...

    def served(self, account_id: str, label: str, moved_because: MoveReason | None) -> None:
        """The turn's reply opened on `account_id`; `moved_because`: why not on the pinned account."""
        ...
