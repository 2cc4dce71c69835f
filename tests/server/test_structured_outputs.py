"""Structured outputs and strict tools on the Claude door (issue 32 item 2), through the official SDK.

Amazon Q has no structured-output mode: the gateway gives the model the schema, holds the reply
until it ends, checks it, gives the model one repair turn when it is wrong, and answers a 422 when
the repair is wrong too — never prose passed off as the parsed object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pydantic
import pytest

from q2api.testing import scripts
from tests.support.gateway_harness import MODEL, Gateway, open_gateway, user


class Weather(pydantic.BaseModel):
    city: str
    celsius: float


GOOD = '{"city": "Paris", "celsius": 21.5}'
WEATHER_TOOL: dict[str, Any] = {
    "name": "get_weather",
    "description": "The weather of a city.",
    "strict": True,
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


@pytest.fixture
async def gw(tmp_path: Path):
    async with open_gateway(tmp_path, Q2API_PING_INTERVAL="0.05") as gateway:
        yield gateway


def system_text(body: dict[str, Any]) -> str:
    return str(body["conversationState"]["history"][0]["userInputMessage"]["content"])


async def test_messages_parse_returns_the_parsed_object(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply(GOOD, chunks=4))
    message = await gw.client.messages.parse(
        model=MODEL, max_tokens=200, messages=[user("Weather in Paris?")], output_format=Weather
    )
    assert message.parsed_output == Weather(city="Paris", celsius=21.5)
    assert message.stop_reason == "end_turn"
    # The schema the SDK sent went to the model, in the system context.
    sent = system_text(gw.upstream_body())
    assert '"celsius"' in sent and "JSON schema" in sent
    assert len(gw.sim.requests) == 1


async def test_the_streaming_form_returns_the_parsed_object(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply(GOOD, chunks=5, delay=0.01))
    async with gw.client.messages.stream(
        model=MODEL, max_tokens=200, messages=[user("Weather in Paris?")], output_format=Weather
    ) as stream:
        message = await stream.get_final_message()
    assert message.parsed_output == Weather(city="Paris", celsius=21.5)


async def test_a_wrong_reply_gets_one_repair_turn_and_the_client_sees_only_the_repaired_one(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("Sure! It is sunny in Paris, 21 degrees."), scripts.text_reply(GOOD))
    deltas: list[str] = []
    async with gw.client.messages.stream(
        model=MODEL, max_tokens=200, messages=[user("Weather in Paris?")], output_format=Weather
    ) as stream:
        async for event in stream:
            if event.type == "text":
                deltas.append(event.text)
        message = await stream.get_final_message()
    assert message.parsed_output == Weather(city="Paris", celsius=21.5)
    assert "".join(deltas) == GOOD  # the prose never reached the client
    assert [block.type for block in message.content] == ["text"]
    repair = gw.upstream_body(1)["conversationState"]
    assert repair["history"][-1]["assistantResponseMessage"]["content"] == "Sure! It is sunny in Paris, 21 degrees."
    assert "not valid JSON" in repair["currentMessage"]["userInputMessage"]["content"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_reply_wrong_after_its_repair_turn_is_a_422_never_passed_off(gw: Gateway, stream: bool):
    gw.sim.enqueue(scripts.text_reply('{"city": "Paris"}'), scripts.text_reply('{"city": "Paris", "celsius": "warm"}'))
    with pytest.raises(anthropic.APIStatusError) as caught:
        if stream:
            async with gw.client.messages.stream(
                model=MODEL, max_tokens=200, messages=[user("Weather?")], output_format=Weather
            ) as events:
                await events.get_final_message()
        else:
            await gw.client.messages.parse(
                model=MODEL, max_tokens=200, messages=[user("Weather?")], output_format=Weather
            )
    assert caught.value.status_code == 422
    assert caught.value.response.headers["x-should-retry"] == "false"
    message = caught.value.body["error"]["message"]
    assert message.startswith("output_config.format could not be honoured") and "celsius" in message
    assert len(gw.sim.requests) == 2  # the reply and its one repair turn, no more


async def test_a_strict_tools_bad_input_is_repaired_before_the_client_sees_it(gw: Gateway):
    gw.sim.enqueue(
        scripts.tool_reply("get_weather", {"town": "Paris"}),
        scripts.tool_reply("get_weather", {"city": "Paris"}, tool_use_id="tooluse_sim_2"),
    )
    message = await gw.client.messages.create(
        model=MODEL, max_tokens=200, messages=[user("Weather in Paris?")], tools=[WEATHER_TOOL]
    )
    calls = [block for block in message.content if block.type == "tool_use"]
    assert [(call.name, call.input) for call in calls] == [("get_weather", {"city": "Paris"})]
    assert message.stop_reason == "tool_use"
    repair = gw.upstream_body(1)["conversationState"]
    assert (
        '[I called the tool get_weather with the input {"town":"Paris"}]'
        in (repair["history"][-1]["assistantResponseMessage"]["content"])
    )
    assert "does not match its input_schema" in repair["currentMessage"]["userInputMessage"]["content"]


async def test_a_tool_without_strict_is_not_checked(gw: Gateway):
    loose = {**WEATHER_TOOL, "strict": False}
    gw.sim.enqueue(scripts.tool_reply("get_weather", {"town": "Paris"}))
    message = await gw.client.messages.create(model=MODEL, max_tokens=200, messages=[user("?")], tools=[loose])
    assert [block.input for block in message.content if block.type == "tool_use"] == [{"town": "Paris"}]
    assert len(gw.sim.requests) == 1


async def test_a_schema_that_cannot_be_checked_is_a_400_naming_it_before_any_upstream_call(gw: Gateway):
    with pytest.raises(anthropic.BadRequestError) as caught:
        await gw.client.messages.create(
            model=MODEL,
            max_tokens=50,
            messages=[user("?")],
            output_config={"format": {"type": "json_schema", "schema": {"$ref": "https://example.com/schema.json"}}},
        )
    assert caught.value.body["error"]["message"].startswith("output_config.format.schema: the reference")
    assert not gw.sim.requests
