"""The order guard: the converted Amazon Q body checked against the rules the service enforces
(docs/protocol.md#request-body, docs/protocol.md#conversation-rules).

The converter repairs everything it can, so its output must always pass; a finding here is a
converter bug, worth logging loudly, never the client's fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from q2api.amazonq.types import (
    CHAT_TRIGGER_MANUAL,
    IDENTIFIER_PATTERN,
    IMAGE_FORMATS,
    MAX_CONVERSATION_ID_LENGTH,
    MAX_IMAGES_PER_MESSAGE,
    MAX_TOOL_DESCRIPTION_LENGTH,
    MODEL_ID_PATTERN,
)
from q2api.conversion.null_scan import holds_null
from q2api.conversion.report import Finding, FindingKind


def validate_conversation(payload: Mapping[str, Any]) -> tuple[Finding, ...]:
    """Every Amazon Q rule the body breaks (empty when it is valid)."""
    return _Guard().check(payload)


class _Guard:
    """One walk over one body. It runs on every request, after a conversion of the same size:
    the JSON path of a finding is written only when there is a finding, and a name that every
    tool round repeats is matched against the identifier pattern once."""

    __slots__ = ("findings", "history_length", "identifiers")

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.history_length = 0
        self.identifiers: set[str] = set()  # strings already found to be valid identifiers

    def bad(self, kind: FindingKind, where: str, problem: str, tool_use_id: str | None = None) -> None:
        self.findings.append(Finding(kind, None, tool_use_id, f"{where}: {problem}"))

    def where(self, position: int) -> str:
        return f"history[{position}]" if position < self.history_length else "currentMessage"

    def check(self, payload: Mapping[str, Any]) -> tuple[Finding, ...]:
        state = payload.get("conversationState")
        if holds_null(payload):
            self.bad(FindingKind.NULL_VALUE, "payload", "contains null")
        if not _is_mapping(state):
            self.bad(FindingKind.INVALID_ORDER, "conversationState", "missing")
            return tuple(self.findings)
        if state.get("chatTriggerType") != CHAT_TRIGGER_MANUAL:
            self.bad(FindingKind.FIELD_LIMIT, "chatTriggerType", "must be MANUAL")
        conversation_id = state.get("conversationId")
        if conversation_id is not None and not (
            isinstance(conversation_id, str) and 1 <= len(conversation_id) <= MAX_CONVERSATION_ID_LENGTH
        ):
            self.bad(FindingKind.FIELD_LIMIT, "conversationId", f"must be 1..{MAX_CONVERSATION_ID_LENGTH} characters")
        history = state.get("history") or []
        current = (state.get("currentMessage") or {}).get("userInputMessage")
        if not _is_mapping(current):
            self.bad(FindingKind.INVALID_ORDER, "currentMessage", "must be a userInputMessage")
            return tuple(self.findings)
        self.history_length = len(history)
        # Strict alternation from a user message, with the current (user) message last, also
        # makes the history start with a user and end with an assistant message.
        messages = [*history, {"userInputMessage": current}]
        previous_tool_uses: Mapping[str, str] = {}
        used_names: set[str] = set()
        for position, entry in enumerate(messages):
            expected_role = "userInputMessage" if position % 2 == 0 else "assistantResponseMessage"
            message = entry.get(expected_role) if _is_mapping(entry) and len(entry) == 1 else None
            if not _is_mapping(message):
                problem = f"expected {expected_role} (strict user/assistant alternation)"
                self.bad(FindingKind.INVALID_ORDER, self.where(position), problem)
                previous_tool_uses = {}
            elif position % 2:
                previous_tool_uses = self.check_assistant(message, position)
                used_names.update(previous_tool_uses.values())
            else:
                self.check_user(message, position, previous_tool_uses)
                previous_tool_uses = {}

        tools = ((current.get("userInputMessageContext") or {}).get("tools")) or []
        offered = self.check_tools(tools)
        # Amazon Q matches tool names without regard to case.
        for name in sorted(name for name in used_names if name.casefold() not in offered):
            problem = f"tool {name!r} is used in history but not listed"
            self.bad(FindingKind.MISSING_TOOL_SPEC, "currentMessage.tools", problem)
        model_id = current.get("modelId")
        if not (isinstance(model_id, str) and MODEL_ID_PATTERN.fullmatch(model_id)):
            self.bad(FindingKind.FIELD_LIMIT, "currentMessage.modelId", "missing or not [a-zA-Z0-9_:.-]+")
        return tuple(self.findings)

    def check_assistant(self, message: Mapping[str, Any], position: int) -> dict[str, str]:
        if not isinstance(message.get("content"), str):
            self.bad(FindingKind.FIELD_LIMIT, f"{self.where(position)}.content", "must be a string")
        tool_uses: dict[str, str] = {}
        for tool_use in message.get("toolUses") or ():
            tool_use_id, name = tool_use.get("toolUseId"), tool_use.get("name")
            if not self.is_identifier(tool_use_id):
                self.bad(FindingKind.FIELD_LIMIT, f"{self.where(position)}.toolUses", f"bad toolUseId {tool_use_id!r}")
            if not self.is_identifier(name):
                self.bad(FindingKind.FIELD_LIMIT, f"{self.where(position)}.toolUses", f"bad tool name {name!r}")
            if not isinstance(tool_use.get("input"), dict):
                problem = "input must be an object"
                self.bad(FindingKind.FIELD_LIMIT, f"{self.where(position)}.toolUses", problem, tool_use_id)
            if tool_use_id in tool_uses:
                problem = "duplicate toolUseId"
                self.bad(FindingKind.FIELD_LIMIT, f"{self.where(position)}.toolUses", problem, tool_use_id)
            tool_uses[tool_use_id] = name
        return tool_uses

    def check_user(self, message: Mapping[str, Any], position: int, answering: Mapping[str, str]) -> None:
        is_current = position == self.history_length
        content = message.get("content")
        # `isspace` is `not strip()` without copying a long content that ends in a newline.
        if not isinstance(content, str) or not content or content.isspace():
            self.bad(FindingKind.FIELD_LIMIT, f"{self.where(position)}.content", "must be a non-empty string")
        if not message.get("origin"):
            self.bad(FindingKind.FIELD_LIMIT, f"{self.where(position)}.origin", "missing")
        if not is_current and "modelId" in message:
            problem = "only the current message carries modelId"
            self.bad(FindingKind.FIELD_LIMIT, f"{self.where(position)}.modelId", problem)
        images = message.get("images") or ()
        if len(images) > MAX_IMAGES_PER_MESSAGE:
            problem = f"{len(images)} images > {MAX_IMAGES_PER_MESSAGE}"
            self.bad(FindingKind.FIELD_LIMIT, f"{self.where(position)}.images", problem)
        for image in images:
            if image.get("format") not in IMAGE_FORMATS or not (image.get("source") or {}).get("bytes"):
                self.bad(FindingKind.FIELD_LIMIT, f"{self.where(position)}.images", "bad image block")
        context = message.get("userInputMessageContext") or {}
        if not is_current and "tools" in context:
            problem = "tools belong on the current message only"
            self.bad(FindingKind.FIELD_LIMIT, f"{self.where(position)}.tools", problem)
        results = context.get("toolResults") or ()
        if position == 0 and results:
            self.bad(FindingKind.INVALID_ORDER, self.where(position), "the first user message cannot carry toolResults")
        seen: set[str] = set()
        for result in results:
            tool_use_id = result.get("toolUseId")
            if tool_use_id in seen:
                self.bad(FindingKind.UNMATCHED_TOOL_RESULT, self.where(position), "duplicate toolResult", tool_use_id)
            seen.add(tool_use_id)
            if tool_use_id not in answering:
                problem = "answers no toolUse of the previous assistant message"
                self.bad(FindingKind.UNMATCHED_TOOL_RESULT, self.where(position), problem, tool_use_id)
            if result.get("status") not in ("success", "error"):
                problem = "toolResult status must be success or error"
                self.bad(FindingKind.FIELD_LIMIT, self.where(position), problem, tool_use_id)
            if not _is_result_content(result.get("content")):
                problem = "toolResult content must be a non-empty list of text/json blocks"
                self.bad(FindingKind.FIELD_LIMIT, self.where(position), problem, tool_use_id)
        for tool_use_id in answering:
            if tool_use_id not in seen:
                problem = "the previous assistant toolUse has no toolResult here"
                self.bad(FindingKind.UNANSWERED_TOOL_USE, self.where(position), problem, tool_use_id)

    def check_tools(self, tools: list[Mapping[str, Any]]) -> set[str]:
        """The offered tool names, case-folded (Amazon Q compares them without regard to case)."""
        offered: set[str] = set()
        for index, tool in enumerate(tools):
            spec = tool.get("toolSpecification") or {}
            name, description = spec.get("name"), spec.get("description")
            where = f"currentMessage.tools[{index}]"
            if not self.is_identifier(name):
                self.bad(FindingKind.FIELD_LIMIT, where, f"bad tool name {name!r}")
            if str(name).casefold() in offered:
                self.bad(FindingKind.FIELD_LIMIT, where, f"duplicate tool name {name!r} (case ignored)")
            if not (isinstance(description, str) and 1 <= len(description) <= MAX_TOOL_DESCRIPTION_LENGTH):
                problem = f"description must be 1..{MAX_TOOL_DESCRIPTION_LENGTH} characters"
                self.bad(FindingKind.FIELD_LIMIT, where, problem)
            schema = (spec.get("inputSchema") or {}).get("json")
            if not isinstance(schema, dict):
                self.bad(FindingKind.FIELD_LIMIT, where, "inputSchema.json must be an object")
            elif schema.get("type") != "object":
                self.bad(FindingKind.FIELD_LIMIT, where, 'inputSchema.json must have "type": "object" at its root')
            offered.add(str(name).casefold())
        return offered

    def is_identifier(self, value: Any) -> bool:
        if type(value) is not str:
            return isinstance(value, str) and IDENTIFIER_PATTERN.fullmatch(value) is not None
        if value in self.identifiers:
            return True
        if IDENTIFIER_PATTERN.fullmatch(value) is None:
            return False
        self.identifiers.add(value)
        return True


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    # The body is built of plain dicts: the exact type test spares the ABC check on every message.
    return type(value) is dict or isinstance(value, Mapping)


def _is_result_content(blocks: Any) -> bool:
    return bool(blocks) and all(
        _is_mapping(block) and (isinstance(block.get("text"), str) or "json" in block) for block in blocks
    )
