"""A reply checked before the client sees it: its events held to the end, judged, then released or repaired.

Amazon Q has no structured-output mode, so a reply that must match a schema (the Claude door's
`output_config.format` and strict tools, the OpenAI doors' `response_format` / `text.format`) is
emulated: the schema is given to the model, and its reply is checked before a byte of it is
sent. `HeldReply` keeps the events after `message_start` until the reply ends, then asks the
request's check:

* nothing wrong (or a reply the check does not judge, such as one cut at `max_tokens`):
  the held events go to the client as they are;
* something wrong, the first time: `Repair` — the server discards them and asks the model again
  once (q2api.conversion.repair_turn), and what that call says is held and judged the same way;
* something wrong again: the check's `failure`, an error instead of the reply; or, for a door
  that judges the final reply itself (the OpenAI doors' own 422), the reply as it is.

An `error` event (the reply broke) is released with everything before it: there is nothing to
judge. While it holds, the server keeps the client's connection alive with pings.
"""

from __future__ import annotations

from dataclasses import dataclass

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.events import StreamEvent
from q2api.anthropic.reply_content import ReplyCheck, ReplyContent, reply_content

REPAIR_TURNS = 1


@dataclass(frozen=True, slots=True)
class Repair:
    """Ask the model again: `content` was wrong for `problem`."""

    content: ReplyContent
    problem: str
    prompt: str


@dataclass(frozen=True, slots=True)
class Failed:
    error: AnthropicError


class HeldReply:
    __slots__ = ("_check", "_held", "repairs_left")

    def __init__(self, check: ReplyCheck, repairs: int = REPAIR_TURNS) -> None:
        self._check = check
        self._held: list[StreamEvent] = []
        self.repairs_left = repairs

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def take(self, events: list[StreamEvent]) -> list[StreamEvent] | Repair | Failed:
        """The events to send now ([] while the reply is still held), or what to do instead."""
        if not events:
            return []
        self._held.extend(events)
        if not any(event["type"] in ("message_delta", "error") for event in events):
            return []
        held, self._held = self._held, []
        if any(event["type"] == "error" for event in held):
            return held
        content = reply_content(held)
        problem = self._check.problem(content)
        if problem is None:
            return held
        prompt = self._check.repair_prompt(problem) if self.repairs_left > 0 else None
        if prompt is not None:
            self.repairs_left -= 1
            return Repair(content, problem, prompt)
        failure = self._check.failure(problem)
        return held if failure is None else Failed(failure)
