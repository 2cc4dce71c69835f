"""Conversion checkpoints: a conversation's history converted once, not again on every turn.

Claude Code resends the whole conversation with every request, one new round appended. A
checkpoint is where the converter stood after a request's messages: the turns it built, the tool
names and ids it mapped, what it reported, and the Amazon Q history entry of every turn that no
later message can change. The next request of the conversation that starts with the very same
messages resumes there and converts only what follows; its conversion is the conversion from
scratch — the same body, the same report (tests/conversion/test_checkpoints.py checks it on
generated conversations and their next turns).

What a resumed conversion can still change, it copies: the last turn (a next message of the same
role merges into it), the maps and the report. The closed turns and their history entries are
shared, read-only, by every conversion that resumes from them, and by the bodies built from them.
A checkpoint also says where the order guard found those entries valid, so that the guard, too,
reads only what is new (q2api.conversion.order_guard.CheckedRun).

`CheckpointStore` keeps the latest checkpoints of recent conversations within a memory budget.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from q2api.amazonq.types import ChatMessage
from q2api.anthropic.types import Message
from q2api.conversion.identifiers import Identifiers
from q2api.conversion.order_guard import CheckedRun, checked_run
from q2api.conversion.report import Finding
from q2api.conversion.turns import Turn, TurnBuilder

# What the saved work depends on besides the messages (ConversionOptions): the per-message text
# limit the builder checks, the origin and image limit of the history entries, and whether the
# model reasons natively (signed thinking goes back as reasoningContent instead of text).
Settings = tuple[int, str, int, bool]


# A closed turn as Amazon Q history, and what building it reported. A plain tuple: a long
# conversation makes one per turn on every request, and a dataclass costs ~10x more to make.
HistoryEntry = tuple[ChatMessage, tuple[Finding, ...]]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    messages: tuple[Message, ...]  # the Claude messages converted so far
    settings: Settings
    turns: tuple[Turn, ...]  # the builder's turns after them; the last one is still open
    findings: tuple[Finding, ...]  # what the builder reported on them
    identifiers: Identifiers  # the tool names and ids mapped on them (never changed: resumes copy it)
    history_tool_names: dict[str, str]  # never changed either
    entries: tuple[HistoryEntry, ...]  # one per turn but the last
    entries_at: int  # the history position of the first of them in the body they were built for
    # Where the order guard found them valid in that body, if it did: it need not read them again.
    checked: CheckedRun | None = None

    def checked_in(self, payload: Mapping[str, Any], previous: CheckedRun | None) -> Checkpoint:
        """This checkpoint, its entries found valid in `payload` (a body the guard passed whole);
        `previous`, the run the guard was given, spares reading again the entries it covers."""
        return replace(self, checked=checked_run(payload, self.entries_at, len(self.entries), previous))

    def resumed_builder(self, report: list[Finding]) -> TurnBuilder:
        """A builder that goes on from here, reporting into `report` (which gets this checkpoint's findings)."""
        report.extend(self.findings)
        turns = [*self.turns[:-1], self.turns[-1].reopened()] if self.turns else []
        return TurnBuilder(
            self.identifiers.copy(report),
            self.settings[0],
            report,
            turns,
            dict(self.history_tool_names),
            native_reasoning=self.settings[3],
        )


class CheckpointStore:
    """The latest checkpoints of recent conversations (a few per conversation: Claude Code's
    sub-agents and side requests share the main conversation's session), least recently used
    dropped first once their requests add up to `max_bytes`. Thread-safe: a large request is
    prepared in a worker thread."""

    def __init__(self, max_bytes: int, per_conversation: int = 4) -> None:
        self._max_bytes = max_bytes
        self._per_conversation = per_conversation
        self._conversations: OrderedDict[str, list[tuple[Checkpoint, int]]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return sum(map(len, self._conversations.values()))

    @property
    def bytes(self) -> int:
        return self._bytes

    def find(self, conversation_id: str, messages: Sequence[Message]) -> Checkpoint | None:
        """The checkpoint of this conversation after the longest run of `messages` from the start."""
        with self._lock:
            kept = self._conversations.get(conversation_id)
            if kept is None:
                return None
            self._conversations.move_to_end(conversation_id)
            candidates = [checkpoint for checkpoint, _ in kept]
        best: Checkpoint | None = None
        for checkpoint in candidates:
            length = len(checkpoint.messages)
            if length > len(messages) or (best is not None and length <= len(best.messages)):
                continue
            # Struct equality, in C: every field of every block, text compared as memory.
            if tuple(messages[:length]) == checkpoint.messages:
                best = checkpoint
        return best

    def keep(self, conversation_id: str, checkpoint: Checkpoint, size: int, replacing: Checkpoint | None) -> None:
        """Keep `checkpoint` (of a request of `size` bytes) in place of `replacing`, the one it resumed from."""
        if size > self._max_bytes:
            return
        with self._lock:
            kept = self._conversations.setdefault(conversation_id, [])
            self._conversations.move_to_end(conversation_id)
            for position, (old, old_size) in enumerate(kept):
                if old is replacing:
                    del kept[position]
                    self._bytes -= old_size
                    break
            kept.insert(0, (checkpoint, size))
            self._bytes += size
            while len(kept) > self._per_conversation:
                self._bytes -= kept.pop()[1]
            while self._bytes > self._max_bytes:
                _, dropped = self._conversations.popitem(last=False)
                self._bytes -= sum(dropped_size for _, dropped_size in dropped)
