"""Session affinity: a conversation's turns go to the account that served its previous turn.

That account holds the conversation's reasoning signatures (Amazon Q refuses another account's:
THINKING_SIGNATURE_INVALID) and its prompt cache (cache reads fall toward 1/N across N accounts).
Before a turn, `preferred` reads the pin (q2api.accounts.session_pins); the account choice takes
the pinned account while it is eligible (q2api.amazonq's account choice says why when it is not);
once the turn is served, `served` records where it went:

* kept — on its pinned account;
* moved — elsewhere, with the reason (`session moved: from=… to=… why=…`, INFO, account labels
  only); what only the old account accepts (its signatures) is left out of what the new one is sent,
  as the retry after a refused signature leaves it out (q2api.amazonq.turn_affinity,
  q2api.server.lifecycle.reply), without spending a refused call;
* started — a conversation without a pin (new, or idle past the affinity time).

Pins are written in the background while the reply streams (its first byte never waits for the
write); the reply's end waits for it (`TurnPin.settled`, a second at most), so the conversation's
next turn finds the pin whichever worker or replica it reaches. A pin store that fails is a turn
without affinity, never a failed turn.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from loguru import logger

from q2api.accounts.session_pins import Pin, SessionPins
from q2api.amazonq.turn_affinity import MoveReason, PinnedAccount

TurnOutcome = Literal["kept", "moved", "started"]
FIND_DEADLINE = 1.0  # seconds a turn waits for its pin before it goes on without one
# After a pin store failed, turns go unpinned this long without asking it (a store that hangs would
# otherwise cost every turn FIND_DEADLINE).
DOWN_SECONDS = 10.0
_WARN_EVERY = 60.0
_LABELS_KEPT = 4096  # account labels remembered (a disabled account's label, to name it in the move line)


@dataclass(frozen=True, slots=True)
class TurnKey:
    digest: str  # the conversation's key (q2api.frontdoors.session_key)
    held: bool = True  # False: the turn goes where the pool sends it (its pin is only written)


@dataclass(frozen=True, slots=True)
class AffinityObserver:
    turn: Callable[[TurnOutcome, str], None] = lambda outcome, why: None  # why: a move's reason, else ""


NO_AFFINITY_OBSERVER = AffinityObserver()


class SessionAffinity:
    def __init__(self, pins: SessionPins, observer: AffinityObserver = NO_AFFINITY_OBSERVER) -> None:
        self._pins = pins
        self._observer = observer
        self._writes: dict[str, asyncio.Task[None]] = {}  # by conversation key: the pins being written
        self._labels: dict[str, str] = {}
        self._warned_at = -_WARN_EVERY
        self._down_until = 0.0  # monotonic: the pin store failed; not asked again before then

    def turn(self, key: Callable[[], TurnKey]) -> TurnPin:
        """What the account choice asks for one turn (a TurnAffinity); `key` gives its conversation's key,
        worked out only when the account choice asks (a one-account pool never does)."""
        return TurnPin(self, key)

    async def preferred(self, key: str) -> Pin | None:
        """The pin of conversation `key`, or None (none, expired, or the pin store did not answer)."""
        if time.monotonic() < self._down_until:
            return None
        try:
            async with asyncio.timeout(FIND_DEADLINE):
                writing = self._writes.get(key)
                if writing is not None:  # this process's last turn of it is still being pinned: read after it
                    await asyncio.wait((writing,))
                return await self._pins.find(key)
        except Exception as exc:  # a failed or silent pin store: this turn goes without affinity
            self._down_until = time.monotonic() + DOWN_SECONDS
            self._warn(f"session affinity: the pin store did not answer ({type(exc).__name__}); turns go unpinned")
            return None

    def served(
        self, key: str, found: Pin | None, pin: Pin, label: str, why: MoveReason | None
    ) -> tuple[TurnOutcome, asyncio.Task[None] | None]:
        """`pin.account_id` (`label`) serves the turn of `key`; `why`: the account choice's reason for not
        taking the pinned account (None when it was not asked to, or took it)."""
        account_id = pin.account_id
        previous_label = self._labels.get(found.account_id, found.account_id) if found is not None else ""
        self._remember(account_id, label)
        if found is None:
            outcome: TurnOutcome = "started"
            reason = ""
        elif found.account_id == account_id:
            outcome, reason = "kept", ""
        else:
            outcome, reason = "moved", why or "unknown"
            logger.info(f"session moved: from={previous_label} to={label} why={reason}")
        self._observer.turn(outcome, reason)
        return outcome, self._write_later(key, pin, found)

    def _remember(self, account_id: str, label: str) -> None:
        if account_id not in self._labels and len(self._labels) >= _LABELS_KEPT:
            self._labels.pop(next(iter(self._labels)))
        self._labels[account_id] = label

    def _write_later(self, key: str, pin: Pin, found: Pin | None) -> asyncio.Task[None] | None:
        if time.monotonic() < self._down_until:
            return None
        task = asyncio.get_running_loop().create_task(self._write(key, pin, found))
        self._writes[key] = task
        task.add_done_callback(lambda done: self._writes.pop(key, None) if self._writes.get(key) is done else None)
        return task

    async def _write(self, key: str, pin: Pin, found: Pin | None) -> None:
        try:
            await self._pins.keep(key, pin, found)
        except Exception as exc:
            self._down_until = time.monotonic() + DOWN_SECONDS
            self._warn(f"session affinity: a pin was not written ({type(exc).__name__}); the next turn may move")

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY:
            self._warned_at = now
            logger.warning(message)

    async def close(self) -> None:
        """Let the pins being written finish (for a while), then close the pin store."""
        if self._writes:
            await asyncio.wait(set(self._writes.values()), timeout=5.0)
        await self._pins.close()


class TurnPin:
    """One turn's affinity (q2api.amazonq.turn_affinity.TurnAffinity): its pin, read once; a turn of several
    upstream calls (web searches, a repair) keeps the account its first call went to."""

    def __init__(self, affinity: SessionAffinity, key: Callable[[], TurnKey]) -> None:
        self._affinity = affinity
        self._key_of = key
        self._key = ""
        self._found: Pin | None = None
        self._looked = False
        self._served: Pin | None = None  # where this turn's last opened call went
        self._writing: asyncio.Task[None] | None = None  # its pin, being written

    async def pinned(self) -> PinnedAccount | None:
        if not self._looked:
            key = self._key_of()
            self._key = key.digest
            self._found = await self._affinity.preferred(self._key) if key.held else None
            self._looked = True
        pin = self._served or self._found
        return PinnedAccount(pin.account_id, pin.foreign_history) if pin is not None else None

    def served(self, account_id: str, label: str, moved_because: MoveReason | None, foreign_history: int) -> None:
        pin = Pin(account_id, foreign_history)
        if self._served is None:
            _, self._writing = self._affinity.served(self._key, self._found, pin, label, moved_because)
        elif account_id != self._served.account_id:  # a later call of the turn moved: the pin follows it
            _, self._writing = self._affinity.served(self._key, self._served, pin, label, moved_because)
        self._served = pin

    async def settled(self) -> None:
        """Wait (FIND_DEADLINE at most) for this turn's pin to be written: called before the reply's last
        byte, so that the next turn, wherever it goes, finds it."""
        writing = self._writing
        if writing is not None and not writing.done():
            await asyncio.wait((writing,), timeout=FIND_DEADLINE)
