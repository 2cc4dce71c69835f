"""Opt-in history trimming (`Q2API_TRIM_HISTORY=oldest`) for clients that cannot compact.

Claude Code compacts its conversation itself when it gets `prompt is too long`, so trimming is off
by default. A client that cannot compact would instead hit Amazon Q's limits on every request from
some point on (docs/protocol.md#request-body): a cap on history messages, and a cap on the body's size. With
trimming on, a body over either limit loses **whole oldest rounds** — an assistant turn and the
user turn that answers it, so a tool call never loses its result nor a result its call — until it
fits. What is always kept: the system context pair, the first user message (the task), and the
last assistant turn (the current message answers it). In place of what was left out stands a
marker pair: a neutral assistant turn and a user turn saying what was left out and why.

The limits chosen (docs/protocol.md#request-body; the sources conflict):

- 198 history messages: the hard cap reported for clients whose User-Agent carries no recent
  `KiroIDE-<version>` — which is q2api's case;
- 1,200,000 bytes of body: a 1.25 MB body was seen accepted and a 1.3 MB one refused with
  `Improperly formed request` (JW #73); a newer report says the limit is now counted in tokens and
  larger bodies pass (KLB PR #26). 1.2 MB stays under every byte limit observed — and trimming
  is for clients that would otherwise fail, so it errs on the side of sending less.

Pure: `trim_history` returns the conversion with a shorter history (a new body; the entries it
keeps are the same objects), reported as a `history_trimmed` finding, which the
`messages normalized:` record counts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, cast

import orjson

from q2api.amazonq.types import ChatMessage, ConversationState
from q2api.conversion.options import Conversion
from q2api.conversion.report import Finding, FindingKind
from q2api.conversion.system_context import CONTEXT_ACKNOWLEDGEMENT

TRIM_ACKNOWLEDGEMENT = "(Part of this conversation was left out here.)"
# What the upstream client adds to the body after conversion (`profileArn`): room kept for it.
_SENDING_MARGIN = 512


class TrimMode(StrEnum):
    """`Q2API_TRIM_HISTORY`."""

    OFF = "off"
    OLDEST = "oldest"  # drop whole oldest rounds when the body is over Amazon Q's limits


@dataclass(frozen=True, slots=True)
class TrimPolicy:
    mode: TrimMode = TrimMode.OFF
    max_body_bytes: int = 1_200_000
    max_history_messages: int = 198


def trim_history(conversion: Conversion, policy: TrimPolicy) -> Conversion:
    """The conversion, its oldest rounds left out if its body is over a limit and trimming is on."""
    if policy.mode is TrimMode.OFF:
        return conversion
    payload = conversion.payload
    state = payload["conversationState"]
    history: list[ChatMessage] = state.get("history", [])
    body_bytes = len(orjson.dumps(payload)) + _SENDING_MARGIN
    if body_bytes <= policy.max_body_bytes and len(history) <= policy.max_history_messages:
        return conversion

    first_kept = _first_droppable(history)
    # Droppable units: (assistant, user) pairs after the first user message, never the last assistant turn.
    units = range(first_kept, len(history) - 2, 2)
    sizes = [len(orjson.dumps(history[i])) + len(orjson.dumps(history[i + 1])) + 2 for i in units]
    dropped, freed = 0, 0
    while dropped < len(sizes):
        marker_bytes = 400  # the marker pair, generously
        fits_bytes = body_bytes - freed + marker_bytes <= policy.max_body_bytes
        fits_count = len(history) - 2 * dropped + 2 <= policy.max_history_messages
        if dropped and fits_bytes and fits_count:
            break
        freed += sizes[dropped]
        dropped += 1
    if dropped == 0:
        return conversion  # nothing can be left out: the request goes as it is

    end = first_kept + 2 * dropped
    left_out = history[first_kept:end]
    tool_calls = sum(_tool_use_count(entry) for entry in left_out)
    still_over = (
        body_bytes - freed + 400 > policy.max_body_bytes or len(history) - 2 * dropped + 2 > policy.max_history_messages
    )
    marker = (
        f"[q2api left out {len(left_out)} earlier messages of this conversation here ({dropped} rounds, "
        f"{tool_calls} tool calls, {freed:,} bytes) to keep the request within Amazon Q's limits "
        f"({policy.max_history_messages} history messages, {policy.max_body_bytes:,} bytes). "
        "The conversation goes on after them.]"
    )
    origin = _origin(history[first_kept - 1])
    marker_pair: list[ChatMessage] = [
        {"assistantResponseMessage": {"content": TRIM_ACKNOWLEDGEMENT}},
        {"userInputMessage": {"content": marker, "origin": origin}},
    ]
    trimmed_history = [*history[:first_kept], *marker_pair, *history[end:]]
    new_state = cast(ConversationState, {**state, "history": trimmed_history})
    finding = Finding(
        FindingKind.HISTORY_TRIMMED,
        detail=(
            f"history[{first_kept}:{end}] left out ({dropped} rounds, {tool_calls} tool calls, {freed:,} bytes): "
            f"the body was {body_bytes:,} bytes with {len(history)} history messages, over the limit of "
            f"{policy.max_body_bytes:,} bytes / {policy.max_history_messages} messages"
            + ("; still over it after leaving out every round it could" if still_over else "")
        ),
    )
    return replace(
        conversion, payload={**payload, "conversationState": new_state}, report=(*conversion.report, finding)
    )


def _first_droppable(history: list[ChatMessage]) -> int:
    """Just after the first user message of the client's (after the system context pair, if there is one)."""
    second: Any = history[1] if len(history) >= 2 else {}
    has_context_pair = (second.get("assistantResponseMessage") or {}).get("content") == CONTEXT_ACKNOWLEDGEMENT
    return 3 if has_context_pair else 1


def _tool_use_count(entry: ChatMessage) -> int:
    message: Any = entry.get("assistantResponseMessage") or {}
    return len(message.get("toolUses") or ())


def _origin(entry: ChatMessage) -> str:
    message: Any = entry.get("userInputMessage") or {}
    return str(message.get("origin") or "AI_EDITOR")
