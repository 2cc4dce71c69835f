"""The OpenAI doors' field tables at work (issue 32 item 1), through the official `openai` SDK.

A field is honoured, emulated, ignored for a stated reason or refused by name: strict function
tools are checked like the Claude door's, what cannot be served is a 400 naming it, and a field no
type knows is named in the log rather than dropped unseen.
"""

from __future__ import annotations

import uuid
from typing import Any

import openai
import pytest

from q2api.testing import scripts
from tests.support.gateway_harness import MODEL, Gateway, capture_logs
from tests.support.openai_harness import openai_client, user

STRICT_FUNCTION: dict[str, Any] = {
    "name": "get_weather",
    "strict": True,
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


async def test_a_strict_function_tools_bad_arguments_are_repaired_on_the_chat_door(gw: Gateway) -> None:
    gw.sim.enqueue(
        scripts.tool_reply("get_weather", {"town": "Paris"}),
        scripts.tool_reply("get_weather", {"city": "Paris"}, tool_use_id="tooluse_sim_2"),
    )
    async with openai_client(gw) as client:
        completion = await client.chat.completions.create(
            model=MODEL, messages=[user("weather?")], tools=[{"type": "function", "function": STRICT_FUNCTION}]
        )
    (call,) = completion.choices[0].message.tool_calls or []
    assert call.function.arguments == '{"city":"Paris"}'
    assert len(gw.sim.requests) == 2


async def test_a_strict_function_tool_wrong_twice_is_a_422_on_the_responses_door(gw: Gateway) -> None:
    gw.sim.enqueue(*[scripts.tool_reply("get_weather", {"town": "Paris"})] * 2)
    async with openai_client(gw) as client:
        with pytest.raises(openai.UnprocessableEntityError) as caught:
            await client.responses.create(
                model=MODEL, input="weather?", tools=[{"type": "function", **STRICT_FUNCTION}]
            )
    assert "does not match its input_schema" in caught.value.body["message"]
    assert caught.value.response.headers["x-should-retry"] == "false"


CHAT_REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("audio", {"audio": {"voice": "alloy", "format": "wav"}, "modalities": ["text", "audio"]}, "audio"),
    ("modalities", {"modalities": ["audio"]}, "modalities"),
    ("custom tool", {"tools": [{"type": "custom", "custom": {"name": "apply_patch"}}]}, "tools[0].type"),
    (
        "allowed_tools",
        {"tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}},
        "tool_choice.type",
    ),
    ("n", {"n": 2}, "n"),
]


@pytest.mark.parametrize(
    ("extra", "param"), [(extra, param) for _, extra, param in CHAT_REFUSALS], ids=[c[0] for c in CHAT_REFUSALS]
)
async def test_the_chat_door_refuses_what_it_cannot_serve_by_name(
    gw: Gateway, extra: dict[str, Any], param: str
) -> None:
    async with openai_client(gw) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model=MODEL, messages=[user("hi")], **extra)
    assert caught.value.body["param"] == param
    assert caught.value.body["message"].startswith(f"{param}: ")
    assert not gw.sim.requests


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"background": True, "background_options": {}}, "background"),
        ({"context_management": [{"type": "compaction"}]}, "context_management"),
    ],
    ids=["background", "context_management"],
)
async def test_the_responses_door_refuses_what_it_cannot_serve_by_name(
    gw: Gateway, extra: dict[str, Any], param: str
) -> None:
    async with openai_client(gw) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.responses.create(model=MODEL, input="hi", extra_body=extra)
    assert caught.value.body["param"] == param and not gw.sim.requests


async def test_a_top_level_field_no_type_knows_is_named_in_the_log_on_both_doors(gw: Gateway) -> None:
    chat_field, responses_field = (f"brand_new_{uuid.uuid4().hex[:8]}" for _ in range(2))
    gw.sim.enqueue(scripts.text_reply("One."), scripts.text_reply("Two."))
    with capture_logs() as logs:
        async with openai_client(gw) as client:
            await client.chat.completions.create(model=MODEL, messages=[user("hi")], extra_body={chat_field: 1})
            await client.responses.create(model=MODEL, input="hi", extra_body={responses_field: 1})
    warnings = " ".join(
        line.message for line in logs.lines if line.level == "WARNING" and "does not know" in line.message
    )
    assert chat_field in warnings and responses_field in warnings
