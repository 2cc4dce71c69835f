"""The request bodies the probe sends: the smallest that answer each question (docs/probe.md lists them).

Built directly in Amazon Q's `GenerateAssistantResponse` shape (q2api.amazonq.types,
docs/protocol.md#request-body): nothing of a user's conversation is involved, so the conversion stage
has nothing to do, and what was sent can be stated exactly. The upstream client adds `profileArn`
and shapes each body for its host, as for every request of the gateway.

The prompts are the probe's own; no report holds them (q2api.probe.redaction).
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import orjson

from q2api.amazonq.reasoning_fields import EFFORT_ORDER, EffortField, ReasoningFields
from q2api.amazonq.types import (
    CHAT_TRIGGER_MANUAL,
    ORIGIN_AI_EDITOR,
    ChatMessage,
    GenerateAssistantResponseRequest,
    Tool,
    ToolUse,
    UserInputMessage,
)
from q2api.conversion.text import EMPTY_ASSISTANT_MESSAGE  # what the gateway sends for an empty reply

PLAIN_PROMPT = "Reply with the single word OK and nothing else."
TOOL_PROMPT = "Call the tool q2api_probe_tool once, with value set to the word ok. Write nothing else."
TOOL_RESULT_TEXT = "ok"
TOOL_RESULT_PROMPT = "(Tool results are attached.) Reply with the single word OK."
THINKING_PROMPT = "What is two plus three? Think about it briefly, then answer with the number only."
THINKING_FOLLOW_UP = "Add one to your answer. Answer with the number only."
CACHE_PROMPT_INTRO = "Reply with the single word OK. The numbered lines below only pad this prompt."
SEARCH_QUERY = "Amazon Q Developer Kiro"
HISTORY_USER = "Hi."
HISTORY_ASSISTANT = "Hello."
FILLER_ASSISTANT = "OK."

TOOL_NAME = "q2api_probe_tool"
TOOL_SPEC: Tool = {
    "toolSpecification": {
        "name": TOOL_NAME,
        "description": "Returns the value it is given. Used by q2api probe to test a tool call round trip.",
        "inputSchema": {"json": {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}},
    }
}
CACHE_POINT = {"type": "default"}
# A cache point caches nothing under a model's minimum (Anthropic's models: 1,024 to 4,096 tokens); the
# padding is about 5,000 tokens, over the largest of those minimums.
CACHE_PADDING_LINES = 400
# The payload search pads the history with user messages of at most this many characters: under the
# 400,000 the Q CLI caps its own messages at (docs/protocol.md#request-body), so no single message is
# refused for its own size before the body is.
MAX_FILLER_MESSAGE_CHARS = 300_000


def nothing_query() -> str:
    """A query meant to find nothing: 64 random hexadecimal digits (a new one each run)."""
    return uuid.uuid4().hex + uuid.uuid4().hex


def plain(model_id: str | None) -> GenerateAssistantResponseRequest:
    return _request(_user(PLAIN_PROMPT, model_id))


def tool_call(model_id: str | None) -> GenerateAssistantResponseRequest:
    current = _user(TOOL_PROMPT, model_id)
    current["userInputMessageContext"] = {"tools": [TOOL_SPEC]}
    return _request(current)


def tool_result(
    model_id: str | None, tool_use_id: str, name: str, tool_input: dict[str, Any]
) -> GenerateAssistantResponseRequest:
    """The second turn: the call in history, its result in the current message (with the tools again)."""
    use: ToolUse = {"toolUseId": tool_use_id, "name": name, "input": tool_input}
    history: list[ChatMessage] = [
        {"userInputMessage": {"content": TOOL_PROMPT, "origin": ORIGIN_AI_EDITOR}},
        {"assistantResponseMessage": {"content": EMPTY_ASSISTANT_MESSAGE, "toolUses": [use]}},
    ]
    current = _user(TOOL_RESULT_PROMPT, model_id)
    current["userInputMessageContext"] = {
        "tools": [TOOL_SPEC],
        "toolResults": [{"toolUseId": tool_use_id, "content": [{"text": TOOL_RESULT_TEXT}], "status": "success"}],
    }
    return _request(current, history)


def thinking(model_id: str, fields: ReasoningFields) -> GenerateAssistantResponseRequest:
    request = _request(_user(THINKING_PROMPT, model_id))
    request["additionalModelRequestFields"] = reasoning_fields(fields)
    return request


def thinking_follow_up(
    model_id: str, fields: ReasoningFields, reply_text: str, reasoning: str, signature: str, redacted: str
) -> GenerateAssistantResponseRequest:
    """The second turn: the first reply in history with its reasoning sent back (signed, or redacted)."""
    assistant: dict[str, Any] = {"content": reply_text or EMPTY_ASSISTANT_MESSAGE}
    if redacted:
        assistant["reasoningContent"] = {"redactedContent": redacted}
    else:
        assistant["reasoningContent"] = {"reasoningText": {"text": reasoning, "signature": signature}}
    history: list[ChatMessage] = [
        {"userInputMessage": {"content": THINKING_PROMPT, "origin": ORIGIN_AI_EDITOR}},
        {"assistantResponseMessage": assistant},  # type: ignore[typeddict-item]
    ]
    request = _request(_user(THINKING_FOLLOW_UP, model_id), history)
    request["additionalModelRequestFields"] = reasoning_fields(fields)
    return request


def reasoning_fields(fields: ReasoningFields) -> dict[str, Any]:
    """The least reasoning the model's schema lets the request ask for (docs/protocol.md#native-thinking)."""
    out: dict[str, Any] = {}
    kinds = [kind for kind in fields.thinking_types if kind != "disabled"]
    if kinds:
        kind = "adaptive" if "adaptive" in kinds else kinds[0]
        out["thinking"] = {"type": kind}
        if kind == "enabled" and "budget_tokens" in fields.thinking_keys:
            out["thinking"]["budget_tokens"] = 1024
    if fields.effort_field is not None and fields.efforts:
        least = min(fields.efforts, key=lambda level: EFFORT_ORDER.index(level) if level in EFFORT_ORDER else 0)
        out[fields.effort_field.value] = {"effort": least}
    elif fields.effort_field is EffortField.REASONING and fields.default_effort:
        out["reasoning"] = {"effort": fields.default_effort}
    if fields.max_tokens_range is not None:
        out["max_tokens"] = fields.max_tokens_range[0]
    return out


def cached(model_id: str, conversation_id: str) -> GenerateAssistantResponseRequest:
    """A prompt of about 5,000 tokens with a cache point; the same body twice should read what the first wrote."""
    lines = "\n".join(
        f"{number:03d}. This line pads the prompt of the cache probe." for number in range(CACHE_PADDING_LINES)
    )
    current = _user(f"{CACHE_PROMPT_INTRO}\n{lines}", model_id)
    current["cachePoint"] = CACHE_POINT  # type: ignore[typeddict-item]
    return _request(current, conversation_id=conversation_id)


def with_history(model_id: str | None, messages: int) -> GenerateAssistantResponseRequest:
    """A plain request after `messages` history messages (an even number: user / assistant pairs)."""
    history: list[ChatMessage] = []
    for _ in range(messages // 2):
        history.append({"userInputMessage": {"content": HISTORY_USER, "origin": ORIGIN_AI_EDITOR}})
        history.append({"assistantResponseMessage": {"content": HISTORY_ASSISTANT}})
    return _request(_user(PLAIN_PROMPT, model_id), history)


def padded(model_id: str | None, target_bytes: int) -> GenerateAssistantResponseRequest:
    """A plain request padded with filler history to about `target_bytes` encoded (profileArn aside)."""
    base = len(orjson.dumps(plain(model_id)))
    pair_overhead = len(orjson.dumps(_filler_pair(""))) + 2
    room = max(target_bytes - base, 0)
    pairs = max(math.ceil(room / MAX_FILLER_MESSAGE_CHARS), 1)
    chars = max(room - pairs * pair_overhead, 0)
    size, extra = divmod(chars, pairs)
    history: list[ChatMessage] = []
    for index in range(pairs):
        history.extend(_filler_pair("x" * (size + (1 if index < extra else 0))))
    request = _request(_user(PLAIN_PROMPT, model_id), history)
    # The estimate above is within a few hundred bytes; the last filler message takes up the difference.
    missing = target_bytes - len(orjson.dumps(request))
    last = history[-2]["userInputMessage"]  # type: ignore[typeddict-item]
    last["content"] = "x" * max(len(last["content"]) + missing, 0)
    return request


def _filler_pair(text: str) -> list[ChatMessage]:
    return [
        {"userInputMessage": {"content": text, "origin": ORIGIN_AI_EDITOR}},
        {"assistantResponseMessage": {"content": FILLER_ASSISTANT}},
    ]


def _user(content: str, model_id: str | None) -> UserInputMessage:
    message: UserInputMessage = {"content": content, "origin": ORIGIN_AI_EDITOR}
    if model_id:
        message["modelId"] = model_id
    return message


def _request(
    current: UserInputMessage, history: list[ChatMessage] | None = None, *, conversation_id: str | None = None
) -> GenerateAssistantResponseRequest:
    state: dict[str, Any] = {
        "conversationId": conversation_id or str(uuid.uuid4()),
        "chatTriggerType": CHAT_TRIGGER_MANUAL,
    }
    if history:
        state["history"] = history
    state["currentMessage"] = {"userInputMessage": current}
    return {"conversationState": state}  # type: ignore[typeddict-item]
