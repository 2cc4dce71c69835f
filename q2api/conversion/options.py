"""What the converter is told (`ConversionOptions`) and what it returns (`Conversion`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from q2api.amazonq.types import (
    MAX_IMAGES_PER_MESSAGE,
    MAX_USER_MESSAGE_CHARS,
    ORIGIN_AI_EDITOR,
    ChatMessage,
    GenerateAssistantResponseRequest,
)
from q2api.conversion.report import Finding
from q2api.models.table import ModelChoice

if TYPE_CHECKING:
    from q2api.conversion.checkpoints import Checkpoint


@dataclass(frozen=True, slots=True)
class ConversionOptions:
    conversation_id: str
    # The model the request goes to, resolved once, by the caller (q2api.models.routing against the
    # live catalogue; tests against the built-in table).
    model: ModelChoice
    origin: str = ORIGIN_AI_EDITOR
    # `max_thinking_length` sent when thinking is on but the client gave no budget (adaptive).
    default_thinking_budget: int = 20_000
    # A single text block longer than this can never fit one Amazon Q message.
    max_message_chars: int = MAX_USER_MESSAGE_CHARS
    max_images_per_message: int = MAX_IMAGES_PER_MESSAGE


@dataclass(frozen=True, slots=True)
class Conversion:
    payload: GenerateAssistantResponseRequest  # the upstream client adds profileArn
    model: ModelChoice
    # Amazon Q tool name -> original Claude tool name, for every name that was changed.
    tool_names: Mapping[str, str]
    report: tuple[Finding, ...]
    # Where the next request of the conversation can resume (q2api.conversion.checkpoints).
    checkpoint: Checkpoint | None = None
    # Amazon Q tool-use id -> the client's, for every id that was changed (renamed, or a reused id made unique).
    tool_use_ids: Mapping[str, str] = field(default_factory=dict)

    @property
    def history(self) -> list[ChatMessage]:
        return self.payload["conversationState"].get("history", [])
