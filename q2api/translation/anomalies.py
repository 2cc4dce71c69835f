"""Structured records of what was odd about one upstream reply, for the app's log."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class AnomalyKind(enum.StrEnum):
    TOOL_INPUT_TRUNCATED = "tool_input_truncated"  # a tool call withheld, the reply ended with max_tokens
    TOOL_USE_WITHOUT_STOP = "tool_use_without_stop"
    LATE_TOOL_USE_EVENT = "late_tool_use_event"  # an event for a tool call already judged
    TOOL_INPUT_LOST = "tool_input_lost"  # the stream failed mid tool call
    INVALID_STATE_EVENT = "invalid_state_event"
    EMPTY_REPLY = "empty_reply"


@dataclass(frozen=True, slots=True)
class StreamFinding:
    """One log-worthy fact about a reply; the app logs `str(finding)`."""

    kind: AnomalyKind
    message: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        details = " ".join(f"{key}={value!r}" for key, value in self.data.items())
        return f"{self.kind}: {self.message}" + (f" ({details})" if details else "")
