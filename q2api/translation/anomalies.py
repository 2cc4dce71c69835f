"""Structured records of what was odd about one upstream reply, for the app's log."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class StreamFinding:
    """One log-worthy fact about a reply; the app logs `str(finding)`.

    Kinds: `tool_input_truncated` (a tool call withheld, reply ended with
    max_tokens), `tool_use_without_stop`, `late_tool_use_event`,
    `tool_input_lost` (the stream failed mid tool call), `invalid_state_event`,
    `empty_reply`.
    """

    kind: str
    message: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        details = " ".join(f"{key}={value!r}" for key, value in self.data.items())
        return f"{self.kind}: {self.message}" + (f" ({details})" if details else "")
