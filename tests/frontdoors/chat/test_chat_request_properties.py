"""Property tests: an OpenAI conversation with tool calls converts without losing a tool result.

Generated agent sessions (system and developer prompts anywhere, several tool rounds, parallel
calls, tool messages as strings or text parts, the legacy function form, user turns between
rounds, assistant text with or without calls) go through the OpenAI door's translation and the
one converter: every tool call id the client sent comes back as an Amazon Q tool use, every tool
message as the tool result of that id with its text, every user text is there, and the Amazon Q
conversation passes the order guard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from q2api.conversion.claude_converter import ConversionOptions, convert_claude_request
from q2api.conversion.order_guard import validate_conversation
from q2api.frontdoors.chat.request import claude_request
from q2api.models.table import resolve_model
from q2api.openai.types import parse_chat_request
from tests.support.converter_helpers import all_text, all_tool_results, assistant_messages

TOOLS = ["get_weather", "read_file", "run_shell"]


@dataclass
class Expected:
    tool_uses: list[str] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)  # tool call id → result text
    texts: list[str] = field(default_factory=list)


@st.composite
def conversations(draw: st.DrawFn) -> tuple[dict[str, Any], Expected]:
    expected = Expected()
    counter = iter(range(1_000_000))

    def marker(prefix: str) -> str:
        return f"{prefix}{next(counter)}Z"

    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": draw(st.sampled_from(["system", "developer"])), "content": marker("SYS")})
    first = marker("ASK")
    expected.texts.append(first)
    messages.append({"role": "user", "content": first})
    for _ in range(draw(st.integers(1, 5))):
        legacy = draw(st.integers(0, 4)) == 0
        text = marker("SAY") if draw(st.booleans()) else None
        if legacy:
            name = draw(st.sampled_from(TOOLS))
            messages.append({"role": "assistant", "content": text, "function_call": {"name": name, "arguments": "{}"}})
            result = marker("OUT")
            messages.append({"role": "function", "name": name, "content": result})
            expected.texts.append(result)
        else:
            calls = []
            for _ in range(draw(st.integers(1, 4))):
                call_id = marker("call_")
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": draw(st.sampled_from(TOOLS)),
                            "arguments": orjson.dumps({"n": call_id}).decode(),
                        },
                    }
                )
                expected.tool_uses.append(call_id)
            messages.append({"role": "assistant", "content": text, "tool_calls": calls})
            for call in draw(st.permutations(calls)):
                result = marker("OUT")
                content: Any = result if draw(st.booleans()) else [{"type": "text", "text": result}]
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
                expected.results[call["id"]] = result
        if text:
            expected.texts.append(text)
        if draw(st.integers(0, 3)) == 0:
            messages.append({"role": draw(st.sampled_from(["system", "developer"])), "content": marker("MID")})
        if draw(st.booleans()):
            said = marker("USR")
            messages.append({"role": "user", "content": said})
            expected.texts.append(said)
    tools = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}} for name in TOOLS]
    return {"model": "claude-sonnet-4-5", "messages": messages, "tools": tools}, expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_no_tool_result_is_lost(generated: tuple[dict[str, Any], Expected]) -> None:
    body, expected = generated
    translated = claude_request(parse_chat_request(orjson.dumps(body)))
    conversion = convert_claude_request(
        translated.request, ConversionOptions(conversation_id="prop", model=resolve_model(translated.request.model))
    )

    assert not validate_conversation(conversion.payload)
    uses = [use["toolUseId"] for message in assistant_messages(conversion) for use in message.get("toolUses", [])]
    results = {result["toolUseId"]: result for result in all_tool_results(conversion)}
    for call_id in expected.tool_uses:
        assert call_id in uses
        assert results[call_id]["status"] == "success"
        assert results[call_id]["content"] == [{"text": expected.results[call_id]}]
    text = all_text(conversion)
    for piece in expected.texts:
        assert piece in text
