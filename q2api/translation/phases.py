"""Where a reply is in its life (q2api.translation.translator's state machine, drawn in its docstring).

`Lifecycle` is what the translator records; `Phase` is what it reports, derived from the lifecycle,
the pending tool call and the open block, so the three can never disagree.
"""

from __future__ import annotations

from enum import Enum


class Phase(Enum):
    NOT_STARTED = "not_started"
    IDLE = "idle"  # message started, no block open
    IN_TEXT = "in_text"
    IN_THINKING = "in_thinking"
    IN_TOOL_USE = "in_tool_use"  # buffering a tool call's input; its block is not started yet
    AWAITING_TOOLS = "awaiting_tools"  # server-tool calls to run before the message goes on
    DONE = "done"
    FAILED = "failed"


class Lifecycle(Enum):
    NOT_STARTED = "not_started"
    STREAMING = "streaming"
    AWAITING_TOOLS = "awaiting_tools"
    DONE = "done"
    FAILED = "failed"
