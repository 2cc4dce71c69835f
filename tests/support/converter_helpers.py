"""Small builders for Claude request bodies and readers for converted Amazon Q payloads."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import orjson

from q2api.anthropic.types import parse_messages_request
from q2api.conversion.claude_converter import Conversion, ConversionOptions, convert_claude_request
from q2api.models.table import resolve_model

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def request_body(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": messages, **fields}


def convert(
    messages: list[dict[str, Any]] | dict[str, Any], *, options: ConversionOptions | None = None, **fields: Any
) -> Conversion:
    """Convert a message list (or a whole body) exactly as the gateway does: bytes → parse → convert."""
    body = messages if isinstance(messages, dict) else request_body(messages, **fields)
    request = parse_messages_request(orjson.dumps(body))
    return convert_claude_request(request, options or table_options(request.model, conversation_id="conv-1"))


def table_options(model: str = "claude-sonnet-4-5", *, conversation_id: str = "c", **fields: Any) -> ConversionOptions:
    """Conversion options for a request naming `model`, resolved against the built-in table (the gateway
    resolves against the live catalogue before converting)."""
    return ConversionOptions(conversation_id=conversation_id, model=resolve_model(model), **fields)


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def system(content: Any) -> dict[str, Any]:
    return {"role": "system", "content": content}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(tool_id: str, name: str = "Bash", tool_input: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": tool_id,
        "name": name,
        "input": tool_input if tool_input is not None else {"command": "ls"},
    }


def tool_result(tool_id: str, content: Any = "ok", is_error: bool | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    return block


def tagged(label: str) -> str:
    """Image data that says which image it is, as valid base64 (the converter checks it)."""
    return base64.b64encode(label.encode()).decode()


def image(data: str = PNG, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


# ---------------------------------------------------------------- reading payloads


def state(conversion: Conversion) -> dict[str, Any]:
    return conversion.payload["conversationState"]


def history(conversion: Conversion) -> list[dict[str, Any]]:
    return state(conversion).get("history", [])


def current(conversion: Conversion) -> dict[str, Any]:
    return state(conversion)["currentMessage"]["userInputMessage"]


def user_messages(conversion: Conversion) -> Iterator[dict[str, Any]]:
    for entry in history(conversion):
        if "userInputMessage" in entry:
            yield entry["userInputMessage"]
    yield current(conversion)


def assistant_messages(conversion: Conversion) -> Iterator[dict[str, Any]]:
    for entry in history(conversion):
        if "assistantResponseMessage" in entry:
            yield entry["assistantResponseMessage"]


def tool_results_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    return (message.get("userInputMessageContext") or {}).get("toolResults", [])


def all_tool_results(conversion: Conversion) -> list[dict[str, Any]]:
    return [result for message in user_messages(conversion) for result in tool_results_of(message)]


def all_text(conversion: Conversion) -> str:
    """Every piece of text the upstream will see, joined."""
    pieces = []
    for message in user_messages(conversion):
        pieces.append(message["content"])
        for result in tool_results_of(message):
            pieces.extend(block.get("text", "") for block in result["content"])
    pieces.extend(message["content"] for message in assistant_messages(conversion))
    return "\n".join(pieces)


def kinds(conversion: Conversion) -> list[str]:
    return [str(finding.kind) for finding in conversion.report]


def roles(conversion: Conversion) -> list[str]:
    return ["user" if "userInputMessage" in entry else "assistant" for entry in history(conversion)]
