"""Context editing (`context_management.edits`) applied by the gateway, as Anthropic applies it. Pure.

Anthropic edits the conversation on its side, before the model reads it; the client keeps its
whole history and sends it on every turn. Amazon Q has no such thing, so the gateway edits the
request before conversion and reports what it did as the API does, in the response's
`context_management.applied_edits` (an edit that cleared nothing is not listed):

* `clear_tool_uses_20250919`: once the trigger is exceeded (default: 100,000 input tokens by the
  gateway's estimate; or a number of tool uses), every tool result but those of the `keep` most
  recent tool uses (default 3) and of the `exclude_tools` is replaced by a short placeholder, the
  oldest first — and, with `clear_tool_inputs` (all, or the tools named), the calls' inputs too.
  Unless at least `clear_at_least` input tokens would go, nothing is cleared.
  Reported as `{"type", "cleared_tool_uses", "cleared_input_tokens"}`.
* `clear_thinking_20251015`: the thinking blocks of all but the `keep` most recent assistant turns
  that have any (default 1; `all` keeps every one) are left out.
  Reported as `{"type", "cleared_thinking_turns", "cleared_input_tokens"}`.
* `compact_20260112` is not an edit of the request: the reply summarises the conversation when
  its trigger is reached (q2api.frontdoors.claude.compaction), and is left to it here.

The request is never changed in place: edited messages are copies (the client's may be shared
with conversion checkpoints). Message and block positions stay as they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from q2api.anthropic.token_count import estimate_blocks_tokens, estimate_request_tokens
from q2api.anthropic.types import (
    AllThinkingTurns,
    ClearThinkingEdit,
    ClearToolUsesEdit,
    ContentBlock,
    InputTokens,
    Message,
    MessagesRequest,
    RedactedThinkingBlock,
    ThinkingBlock,
    ThinkingTurns,
    ToolResultBlock,
    ToolUseBlock,
    ToolUses,
)

CLEAR_TOOL_USES_TRIGGER = 100_000  # input tokens, Anthropic's default
CLEAR_TOOL_USES_KEEP = 3
CLEAR_THINKING_KEEP = 1
CLEARED_RESULT = "[This tool result was cleared to save context. Call the tool again if you need it.]"

AppliedEdit = dict[str, Any]


@dataclass(slots=True)
class _ToolUse:
    message: int
    block: int
    id: str
    name: str
    result: tuple[int, int] | None = None  # where its tool_result is


def apply_context_edits(request: MessagesRequest) -> tuple[MessagesRequest, tuple[AppliedEdit, ...]]:
    """`request` with its clearing edits applied, and the edits that cleared something (in the API's shape)."""
    management = request.context_management
    if management is None or not management.edits:
        return request, ()
    applied: list[AppliedEdit] = []
    for edit in management.edits:
        if isinstance(edit, ClearToolUsesEdit):
            request, report = _clear_tool_uses(request, edit)
        elif isinstance(edit, ClearThinkingEdit):
            request, report = _clear_thinking(request, edit)
        else:  # compact_20260112: the reply's
            continue
        if report is not None:
            applied.append(report)
    return request, tuple(applied)


# ---------------------------------------------------------------- clear_tool_uses_20250919


def _clear_tool_uses(request: MessagesRequest, edit: ClearToolUsesEdit) -> tuple[MessagesRequest, AppliedEdit | None]:
    uses = _tool_uses(request.messages)
    trigger = edit.trigger or InputTokens(CLEAR_TOOL_USES_TRIGGER)
    if isinstance(trigger, ToolUses):
        if len(uses) <= trigger.value:
            return request, None
    elif estimate_request_tokens(request) <= trigger.value:
        return request, None
    keep = (edit.keep or ToolUses(CLEAR_TOOL_USES_KEEP)).value
    excluded = set(edit.exclude_tools or ())
    older = uses[: max(len(uses) - keep, 0)]
    cleared = [use for use in older if use.name not in excluded]
    if not cleared:
        return request, None
    input_names = edit.clear_tool_inputs if isinstance(edit.clear_tool_inputs, list) else ()
    messages = list(request.messages)
    saved = 0
    for use in cleared:
        if use.result is not None:
            message, block = use.result
            result = _block(messages, message, block)
            assert isinstance(result, ToolResultBlock)
            saved += estimate_blocks_tokens([result]) - estimate_blocks_tokens([_cleared_result(result)])
            _replace(messages, message, block, _cleared_result(result))
        if edit.clear_tool_inputs is True or use.name in input_names:
            call = _block(messages, use.message, use.block)
            assert isinstance(call, ToolUseBlock)
            if call.input:
                emptied = msgspec.structs.replace(call, input={})
                saved += estimate_blocks_tokens([call]) - estimate_blocks_tokens([emptied])
                _replace(messages, use.message, use.block, emptied)
    at_least = edit.clear_at_least.value if edit.clear_at_least is not None else 0
    if saved < at_least:
        return request, None
    report = {
        "type": "clear_tool_uses_20250919",
        "cleared_tool_uses": len(cleared),
        "cleared_input_tokens": max(saved, 0),
    }
    return msgspec.structs.replace(request, messages=messages), report


def _tool_uses(messages: list[Message]) -> list[_ToolUse]:
    """Every tool use of the conversation in order, with where its result is (the first one answering it)."""
    uses: list[_ToolUse] = []
    waiting: dict[str, _ToolUse] = {}
    for message_index, message in enumerate(messages):
        if not isinstance(message.content, list):
            continue
        for block_index, block in enumerate(message.content):
            if isinstance(block, ToolUseBlock) and message.role == "assistant":
                use = _ToolUse(message_index, block_index, block.id, block.name)
                uses.append(use)
                waiting[block.id] = use
            elif isinstance(block, ToolResultBlock) and message.role == "user":
                answered = waiting.pop(block.tool_use_id, None)
                if answered is not None:
                    answered.result = (message_index, block_index)
    return uses


def _cleared_result(result: ToolResultBlock) -> ToolResultBlock:
    return msgspec.structs.replace(result, content=CLEARED_RESULT)


# ---------------------------------------------------------------- clear_thinking_20251015


def _clear_thinking(request: MessagesRequest, edit: ClearThinkingEdit) -> tuple[MessagesRequest, AppliedEdit | None]:
    keep = edit.keep
    if keep == "all" or isinstance(keep, AllThinkingTurns):
        return request, None
    kept = keep.value if isinstance(keep, ThinkingTurns) else CLEAR_THINKING_KEEP
    turns = [
        index
        for index, message in enumerate(request.messages)
        if message.role == "assistant"
        and isinstance(message.content, list)
        and any(isinstance(block, (ThinkingBlock, RedactedThinkingBlock)) for block in message.content)
    ]
    cleared = turns[: max(len(turns) - kept, 0)]
    if not cleared:
        return request, None
    messages = list(request.messages)
    saved = 0
    for index in cleared:
        content = messages[index].content
        assert isinstance(content, list)
        thinking = [block for block in content if isinstance(block, (ThinkingBlock, RedactedThinkingBlock))]
        saved += estimate_blocks_tokens(thinking)
        rest = [block for block in content if not isinstance(block, (ThinkingBlock, RedactedThinkingBlock))]
        messages[index] = msgspec.structs.replace(messages[index], content=rest)
    report = {"type": "clear_thinking_20251015", "cleared_thinking_turns": len(cleared), "cleared_input_tokens": saved}
    return msgspec.structs.replace(request, messages=messages), report


# ---------------------------------------------------------------- helpers


def _block(messages: list[Message], message: int, block: int) -> ContentBlock:
    content = messages[message].content
    assert isinstance(content, list)
    return content[block]


def _replace(messages: list[Message], message: int, block: int, replacement: ContentBlock) -> None:
    """Put `replacement` at (message, block), copying the message (and its block list) the first time."""
    content = messages[message].content
    assert isinstance(content, list)
    changed = list(content)
    changed[block] = replacement
    messages[message] = msgspec.structs.replace(messages[message], content=changed)
