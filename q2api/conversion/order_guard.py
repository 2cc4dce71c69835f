"""The order guard: the converted Amazon Q body checked against the rules the service enforces
(docs/protocol.md#request-body, docs/protocol.md#conversation-rules).

The converter repairs everything it can, so its output must always pass; a finding here is a
converter bug, worth logging loudly, never the client's fault.

A conversion resumed from a checkpoint (q2api.conversion.checkpoints) reuses the history entries
of the turns the checkpoint closed: the very same objects, never changed once built. A `CheckedRun`
says where such entries sat in a body the guard found valid, and where its walk stood after them;
given one, the guard goes past those entries when it finds them at the same place, and carries
on from that state. The findings are the same as from a full walk: the checks that span entries
see the run through that state (the tool uses the next entry must answer, the tool names that
must be offered), and nothing in a valid run can become invalid without changing an object.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class CheckedRun:
    """History entries the guard found valid, from history position `start` of their body."""

    start: int
    entries: tuple[Mapping[str, Any], ...]
    tool_uses_after: Mapping[str, str]  # toolUseId -> name: what the entry after the run must answer
    used_names: frozenset[str]  # the tool names the run's assistant entries use

    def sits_in(self, history: Sequence[Any]) -> bool:
        """Whether these very entries are at the same place in `history`."""
        end = self.start + len(self.entries)
        return end <= len(history) and all(map(operator.is_, history[self.start : end], self.entries))


def validate_conversation(payload: Mapping[str, Any], checked: CheckedRun | None = None) -> tuple[Finding, ...]:
    """Every Amazon Q rule the body breaks (empty when it is valid). `checked`: a run of its history
    entries found valid before, unchanged since (see the module docstring)."""
    return _Guard(checked).check(payload)


def checked_run(payload: Mapping[str, Any], start: int, count: int, checked: CheckedRun | None = None) -> CheckedRun:
    """The run of `count` history entries from `start` of `payload`, a body the guard found valid.
    `checked`, a run it was given for the body, spares reading again the entries it covers."""
    history: list[Mapping[str, Any]] = payload["conversationState"].get("history", [])
    entries = tuple(history[start : start + count])
    used_names: set[str] = set()
    first_new = 0
    if checked is not None and checked.start == start and len(checked.entries) <= count and checked.sits_in(history):
        used_names.update(checked.used_names)
        first_new = len(checked.entries)
    tool_uses_after: dict[str, str] = {}
    for entry in entries[first_new:]:
        tool_uses = entry.get("assistantResponseMessage", {}).get("toolUses", ())
        used_names.update(tool_use["name"] for tool_use in tool_uses)
    if entries:
        last = entries[-1].get("assistantResponseMessage", {})
        tool_uses_after = {tool_use["toolUseId"]: tool_use["name"] for tool_use in last.get("toolUses", ())}
    return CheckedRun(start, entries, tool_uses_after, frozenset(used_names))


class _Guard:
    """One walk over one body. It runs on every request, after a conversion of the same size:
    the JSON path of a finding is written only when there is a finding, and a name that every
    tool round repeats is matched against the identifier pattern once."""

    __slots__ = ("checked", "findings", "history_length", "identifiers")

    def __init__(self, checked: CheckedRun | None = None) -> None:
        self.checked = checked
        self.findings: list[Finding] = []
        self.history_length = 0
        self.identifiers: set[str] = set()  # strings already found to be valid identifiers

    def bad(self, kind: FindingKind, where: str, problem: str, tool_use_id: str | None = None) -> None:
        self.findings.append(Finding(kind, None, tool_use_id, f"{where}: {problem}"))

    def where(self, position: int) -> str:
        return f"history[{position}]" if position < self.history_length else "currentMessage"

    def check(self, payload: Mapping[str, Any]) -> tuple[Finding, ...]:
        state = payload.get("conversationState")
        history = state.get("history") if _is_mapping(state) else None
        checked = self.checked if type(history) is list and self.checked and self.checked.sits_in(history) else None
        if _holds_null_outside(payload, checked):
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
        skip_from, skip_to = (checked.start, checked.start + len(checked.entries)) if checked else (-1, -1)
        for position, entry in enumerate(messages):
            if skip_from <= position < skip_to:
                if position == skip_to - 1:  # the run is behind: its state is the walk's
                    assert checked is not None
                    previous_tool_uses = checked.tool_uses_after
                    used_names.update(checked.used_names)
                continue
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


def _holds_null_outside(payload: Mapping[str, Any], checked: CheckedRun | None) -> bool:
    """Whether a null sits anywhere in the body but in the checked run, which held none."""
    if checked is None:
        return holds_null(payload)
    state = payload["conversationState"]
    history = state["history"]
    end = checked.start + len(checked.entries)
    rest = [
        *(value for key, value in payload.items() if key != "conversationState"),
        *(value for key, value in state.items() if key != "history"),
        *history[: checked.start],
        *history[end:],
    ]
    return None in payload or None in state or holds_null(rest)


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    # The body is built of plain dicts: the exact type test spares the ABC check on every message.
    return type(value) is dict or isinstance(value, Mapping)


def _is_result_content(blocks: Any) -> bool:
    return bool(blocks) and all(
        _is_mapping(block) and (isinstance(block.get("text"), str) or "json" in block) for block in blocks
    )
