"""System text → conversation context (Amazon Q has no system field,
docs/protocol.md#request-body).

Placement, and why:

* The top-level `system` prompt (and the full text of any tool description too long for a tool
  spec) goes into a **synthetic first history pair** — a user message holding the context
  between markers and a fixed assistant acknowledgement — as the Amazon Q CLI does with its own
  context. Claude Code's system prompt is the same on every turn, so this pair is byte-identical
  from one request to the next: history only ever grows at its end, nothing the model saw
  earlier moves, and the current message carries only what the user just said (a prefix on the
  current message would travel from message to message as the conversation advances).
* A `role: "system"` turn stays **where the client put it**: its text becomes labelled context in
  the user turn it belongs to (merged like any consecutive user turn). Claude Code sends these
  mid-conversation; anchoring them in place keeps earlier history unchanged when a new one
  arrives and lets the model read them in order. Empty ones are dropped and reported.
"""

from __future__ import annotations

from q2api.amazonq.types import ChatMessage
from q2api.anthropic.types import TextBlock
from q2api.conversion.text import checked_text

CONTEXT_ACKNOWLEDGEMENT = "I will follow these instructions and use this context in my responses."


def system_prompt_text(system: str | list[TextBlock] | None, limit: int) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return checked_text(system, limit, "system")
    return "\n\n".join(
        checked_text(block.text, limit, "system", index, "text") for index, block in enumerate(system) if block.text
    )


def system_turn_text(text: str) -> str:
    return f"<system_message>\n{text}\n</system_message>"


def full_tool_description(name: str, description: str) -> str:
    return f"--- FULL DESCRIPTION OF TOOL {name} BEGIN ---\n{description}\n--- FULL DESCRIPTION OF TOOL {name} END ---"


def context_pair(system_text: str, extra_sections: list[str], origin: str) -> list[ChatMessage]:
    """The synthetic first history pair, or nothing when there is no context."""
    sections = []
    if system_text:
        sections.append(f"--- SYSTEM PROMPT BEGIN ---\n{system_text}\n--- SYSTEM PROMPT END ---")
    sections.extend(extra_sections)
    if not sections:
        return []
    return [
        {"userInputMessage": {"content": "\n\n".join(sections), "origin": origin}},
        {"assistantResponseMessage": {"content": CONTEXT_ACKNOWLEDGEMENT}},
    ]
