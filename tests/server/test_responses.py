"""The OpenAI Responses door through the real gateway, driven by the official `openai` SDK.

`responses.create` and `responses.stream`, the stored responses (`retrieve`, `delete`,
`input_items.list`), `previous_response_id` conversations of several turns with parallel
function calls, images and files from data URLs, reasoning, structured output, `store: false`
and the key a response belongs to — each checked on what the client gets and on what reached
the (simulated) Amazon Q upstream. Errors: test_responses_errors.py; two replicas:
test_responses_replicas.py; the real Codex CLI: test_codex_cli.py.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from q2api.testing import scripts
from tests.support.gateway_harness import (
    CLIENT_KEY,
    MODEL,
    Gateway,
    capture_logs,
    current_user_message,
    open_gateway,
    read_sse,
)
from tests.support.openai_harness import PNG_BYTES, assert_openai_envelope, openai_client, tool_calls_reply
from tests.support.pdf_files import pdf_with_text

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": True,
}


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return current_user_message(body).get("userInputMessageContext", {}).get("toolResults", [])


def history_text(body: dict[str, Any]) -> str:
    return json.dumps(body["conversationState"]["history"])


# -- one response ------------------------------------------------------------------


async def test_a_plain_response(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("Hello from Amazon Q", chunks=4))
    with capture_logs() as logs:
        async with openai_client(gw) as client:
            response = await client.responses.create(
                model=MODEL,
                input="hi there",
                instructions="You are terse.",
                metadata={"ticket": "42"},
                temperature=0.2,
                extra_body={"an_unknown_field": True, "prompt_cache_key": "k"},
            )

    assert response.object == "response" and response.id.startswith("resp_")
    assert response.status == "completed" and response.model == MODEL
    assert response.output_text == "Hello from Amazon Q"
    (message,) = response.output
    assert message.type == "message" and message.role == "assistant" and message.status == "completed"
    assert message.id.startswith("msg_")
    assert response.instructions == "You are terse." and response.metadata == {"ticket": "42"}
    assert response.temperature == 0.2 and response.store is True
    usage = response.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_tokens_details.cached_tokens == 0 and usage.output_tokens_details.reasoning_tokens == 0
    body = gw.upstream_body()
    assert "hi there" in current_user_message(body)["content"]
    assert "You are terse." in history_text(body)
    (line,) = [line for line in logs.lines if line.message.startswith("POST /v1/responses")]
    assert line.extra["status"] == 200 and line.extra["model"] == MODEL and line.extra["stop_reason"] == "end_turn"
    assert response.id and "x-q2api-upstream-model" not in (response.model_extra or {})


async def test_a_streamed_response_has_every_event_in_order(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("Streaming, one piece at a time.", chunks=6, delay=0.01))
    async with openai_client(gw) as client, client.responses.stream(model=MODEL, input="go") as stream:
        events = [event async for event in stream]
        final = await stream.get_final_response()

    kinds = [event.type for event in events]
    assert kinds[:5] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert kinds.count("response.output_text.delta") >= 2  # as the upstream's pieces arrived
    assert [event.sequence_number for event in events] == list(range(len(events)))
    deltas = [event for event in events if event.type == "response.output_text.delta"]
    assert deltas[-1].snapshot == "Streaming, one piece at a time."
    assert final.output_text == "Streaming, one piece at a time." and final.status == "completed"
    assert final.usage is not None and final.usage.output_tokens > 0
    assert events[0].response.status == "in_progress" and events[0].response.id == final.id


async def test_the_raw_stream_names_each_event(gw: Gateway):
    """Codex reads the SSE `event:` line and the JSON `type`; both say the same."""
    gw.sim.enqueue(scripts.text_reply("Hi"))
    async with (
        gw.http() as http,
        http.stream("POST", "/v1/responses", json={"model": MODEL, "input": "hi", "stream": True}) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [event async for event in read_sse(response)]
    assert events and all(json.loads(event.data)["type"] == event.name for event in events)
    assert events[-1].name == "response.completed"


# -- function calls and conversations ---------------------------------------------------


async def test_a_conversation_of_several_turns_with_parallel_calls(gw: Gateway):
    """previous_response_id carries everything: earlier text, each call with its output."""
    async with openai_client(gw) as client:
        gw.sim.enqueue(scripts.text_reply("Which cities?"))
        first = await client.responses.create(model=MODEL, input="Weather, please.", tools=[WEATHER])

        gw.sim.enqueue(
            tool_calls_reply(
                ("call_paris", "get_weather", {"city": "Paris"}),
                ("call_rome", "get_weather", {"city": "Rome"}),
                text_before="Looking both up.",
            )
        )
        second = await client.responses.create(
            model=MODEL, input="Paris and Rome.", previous_response_id=first.id, tools=[WEATHER]
        )
        calls = [item for item in second.output if item.type == "function_call"]
        assert [(call.call_id, call.name, json.loads(call.arguments)) for call in calls] == [
            ("call_paris", "get_weather", {"city": "Paris"}),
            ("call_rome", "get_weather", {"city": "Rome"}),
        ]
        assert all(call.status == "completed" and call.id.startswith("fc_") for call in calls)
        assert second.output[0].type == "message" and second.output_text == "Looking both up."

        gw.sim.enqueue(tool_calls_reply(("call_lisbon", "get_weather", {"city": "Lisbon"})))
        outputs = [
            {"type": "function_call_output", "call_id": "call_paris", "output": "Paris: 18C sunny"},
            {"type": "function_call_output", "call_id": "call_rome", "output": "Rome: 24C clear"},
        ]
        third = await client.responses.create(
            model=MODEL, input=outputs, previous_response_id=second.id, tools=[WEATHER]
        )
        body = gw.upstream_body()
        results = {result["toolUseId"]: result["content"][0]["text"] for result in tool_results(body)}
        assert results == {"call_paris": "Paris: 18C sunny", "call_rome": "Rome: 24C clear"}
        assert "Weather, please." in history_text(body) and "Which cities?" in history_text(body)

        gw.sim.enqueue(scripts.text_reply("Paris 18C, Rome 24C, Lisbon 21C."))
        (lisbon,) = [item for item in third.output if item.type == "function_call"]
        fourth = await client.responses.create(
            model=MODEL,
            input=[{"type": "function_call_output", "call_id": lisbon.call_id, "output": "Lisbon: 21C"}],
            previous_response_id=third.id,
            tools=[WEATHER],
        )
    assert fourth.output_text == "Paris 18C, Rome 24C, Lisbon 21C."
    body = gw.upstream_body()
    everything = json.dumps(body["conversationState"])
    for text in ("Paris: 18C sunny", "Rome: 24C clear", "Lisbon: 21C", "Paris and Rome."):
        assert text in everything
    assert [result["toolUseId"] for result in tool_results(body)] == ["call_lisbon"]
    assert fourth.previous_response_id == third.id


async def test_a_streamed_function_call_and_its_arguments(gw: Gateway):
    gw.sim.enqueue(tool_calls_reply(("call_1", "get_weather", {"city": "Oslo"})))
    async with (
        openai_client(gw) as client,
        client.responses.stream(model=MODEL, input="Oslo?", tools=[WEATHER]) as stream,
    ):
        events = [event async for event in stream]
        final = await stream.get_final_response()
    argument_deltas = [event for event in events if event.type == "response.function_call_arguments.delta"]
    assert argument_deltas and json.loads(argument_deltas[-1].snapshot) == {"city": "Oslo"}
    (done,) = [event for event in events if event.type == "response.function_call_arguments.done"]
    assert json.loads(done.arguments) == {"city": "Oslo"}
    (call,) = final.output
    assert call.type == "function_call" and call.call_id == "call_1" and call.name == "get_weather"
    # `strict` tools: the SDK parses the arguments itself.
    assert call.parsed_arguments == {"city": "Oslo"}


async def test_a_whole_conversation_sent_as_input_needs_no_store(gw: Gateway):
    """Codex's way: `store: false` and the whole conversation as input, reasoning items included."""
    gw.sim.enqueue(scripts.text_reply("Done."))
    conversation = [
        {"role": "developer", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "I should run ls."}]},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"cmd": "ls"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt\nb.txt"},
    ]
    async with openai_client(gw) as client:
        response = await client.responses.create(
            model=MODEL,
            input=conversation,
            store=False,
            tools=[{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
        )
        assert response.store is False and response.output_text == "Done."
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(response.id)
    body = gw.upstream_body()
    assert tool_results(body)[0]["content"][0]["text"] == "a.txt\nb.txt"
    assert "I should run ls." in history_text(body) and "Be brief." in history_text(body)


async def test_namespaced_tools_come_back_with_their_namespace(gw: Gateway):
    namespace = {
        "type": "namespace",
        "name": "agents",
        "description": "Sub-agents.",
        "tools": [{"type": "function", "name": "spawn", "parameters": {"type": "object"}}],
    }
    gw.sim.enqueue(tool_calls_reply(("call_s", "agents__spawn", {"task": "x"})))
    async with openai_client(gw) as client:
        response = await client.responses.create(model=MODEL, input="go", tools=[namespace])
        (call,) = response.output
        assert (call.name, call.namespace) == ("spawn", "agents")
        gw.sim.enqueue(scripts.text_reply("ok"))
        await client.responses.create(
            model=MODEL,
            previous_response_id=response.id,
            tools=[namespace],
            input=[{"type": "function_call_output", "call_id": "call_s", "output": "spawned"}],
        )
    body = gw.upstream_body()
    assert "agents__spawn" in history_text(body) and tool_results(body)[0]["toolUseId"] == "call_s"


# -- content -------------------------------------------------------------------------------


async def test_an_image_and_a_file_reach_amazon_q(gw: Gateway):
    image = "data:image/png;base64," + base64.b64encode(PNG_BYTES).decode()
    pdf = "data:application/pdf;base64," + base64.b64encode(pdf_with_text("The treaty text.")).decode()
    gw.sim.enqueue(scripts.text_reply("A tiny image and a treaty."))
    async with openai_client(gw) as client:
        response = await client.responses.create(
            model=MODEL,
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What are these?"},
                        {"type": "input_image", "image_url": image},
                        {"type": "input_file", "filename": "treaty.pdf", "file_data": pdf},
                    ],
                }
            ],
        )
    assert response.output_text == "A tiny image and a treaty."
    message = current_user_message(gw.upstream_body())
    assert message["images"][0]["format"] == "png"
    assert base64.b64decode(message["images"][0]["source"]["bytes"]) == PNG_BYTES
    assert "The treaty text." in message["content"]


# -- reasoning and structured output ---------------------------------------------------------


async def test_reasoning_becomes_a_reasoning_item_with_summary_events(gw: Gateway):
    gw.sim.enqueue(scripts.thinking_reply("First, the sky.", "It is blue.", style="reasoning", chunks=3))
    async with (
        openai_client(gw) as client,
        client.responses.stream(
            model=MODEL,
            input="Why is the sky blue?",
            reasoning={"effort": "high", "summary": "auto"},
            include=["reasoning.encrypted_content"],
        ) as stream,
    ):
        events = [event async for event in stream]
        final = await stream.get_final_response()
    kinds = [event.type for event in events]
    assert "response.reasoning_summary_part.added" in kinds and "response.reasoning_summary_part.done" in kinds
    summary = "".join(event.delta for event in events if event.type == "response.reasoning_summary_text.delta")
    assert summary == "First, the sky."
    reasoning, message = final.output
    assert reasoning.type == "reasoning" and reasoning.summary[0].text == "First, the sky."
    assert reasoning.encrypted_content == "sim-sig"
    assert message.type == "message" and final.output_text == "It is blue."
    assert final.reasoning.effort == "high"
    assert final.usage.output_tokens_details.reasoning_tokens > 0
    # The effort became a thinking budget the model was told about.
    assert "thinking" in json.dumps(gw.upstream_body()).lower()


async def test_reasoning_without_a_summary_is_reasoning_text(gw: Gateway):
    gw.sim.enqueue(scripts.thinking_reply("Hmm.", "Yes.", style="reasoning"))
    async with openai_client(gw) as client:
        response = await client.responses.create(model=MODEL, input="?", reasoning={"effort": "low"})
    reasoning = response.output[0]
    assert reasoning.type == "reasoning" and reasoning.summary == []
    assert reasoning.content[0].text == "Hmm." and reasoning.encrypted_content is None


class Weather(BaseModel):
    city: str
    celsius: int


async def test_structured_output_is_parsed_and_checked(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply('{"city": "Paris", "celsius": 18}'))
    async with openai_client(gw) as client:
        parsed = await client.responses.parse(model=MODEL, input="Paris weather as JSON", text_format=Weather)
        assert parsed.output_parsed == Weather(city="Paris", celsius=18)
        instruction = history_text(gw.upstream_body())
        assert "JSON schema" in instruction and "celsius" in instruction

        gw.sim.enqueue(scripts.text_reply("Sure! It is 18C in Paris."))
        with pytest.raises(openai.UnprocessableEntityError) as caught:
            await client.responses.parse(model=MODEL, input="again", text_format=Weather)
    error = assert_openai_envelope(caught.value.body)
    assert error["code"] == "invalid_response_format" and "not valid JSON" in error["message"]
    assert error["param"] == "text.format" and caught.value.response.headers["x-should-retry"] == "false"


async def test_structured_output_that_fails_mid_stream_is_a_failed_response(gw: Gateway):
    gw.sim.enqueue(
        scripts.text_reply('{"city": "Paris"}'), scripts.text_reply('{"city": "Paris"}')
    )  # + the repair turn
    async with (
        openai_client(gw) as client,
        client.responses.stream(model=MODEL, input="Paris", text_format=Weather) as stream,
    ):
        events = [event async for event in stream]
    kinds = [event.type for event in events]
    assert "response.output_text.delta" in kinds and "response.output_text.done" not in kinds
    assert kinds[-2:] == ["error", "response.failed"]
    failed = events[-1].response
    assert failed.status == "failed" and failed.error.code == "invalid_response_format"
    assert "celsius" in failed.error.message


# -- stored responses ---------------------------------------------------------------------------


async def test_retrieve_list_input_items_and_delete(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("One."), scripts.text_reply("Two."))
    async with openai_client(gw) as client:
        first = await client.responses.create(model=MODEL, input="first")
        inputs = [{"role": "user", "content": f"message {n}"} for n in range(5)]
        second = await client.responses.create(model=MODEL, input=inputs, previous_response_id=first.id)

        got = await client.responses.retrieve(second.id)
        assert got.id == second.id and got.output_text == "Two." and got.previous_response_id == first.id
        assert got.usage.total_tokens == second.usage.total_tokens

        items = await client.responses.input_items.list(second.id)
        assert [item.content[0].text for item in items.data] == [f"message {n}" for n in reversed(range(5))]
        assert all(item.id.startswith("msg_") and item.type == "message" for item in items.data)
        oldest_first = [
            item.content[0].text async for item in client.responses.input_items.list(second.id, order="asc", limit=2)
        ]
        assert oldest_first == [f"message {n}" for n in range(5)]  # three pages, followed by the SDK

        await client.responses.delete(second.id)
        with pytest.raises(openai.NotFoundError) as caught:
            await client.responses.retrieve(second.id)
        assert assert_openai_envelope(caught.value.body)["code"] == "response_not_found"
        with pytest.raises(openai.NotFoundError):
            await client.responses.delete(second.id)
        with pytest.raises(openai.NotFoundError) as gone:
            await client.responses.create(model=MODEL, input="more", previous_response_id=second.id)
        assert assert_openai_envelope(gone.value.body)["param"] == "previous_response_id"
        assert (await client.responses.retrieve(first.id)).output_text == "One."


async def test_a_response_belongs_to_the_key_that_made_it(tmp_path):
    keys = f"{CLIENT_KEY},other-client-key-7c1d"
    async with open_gateway(tmp_path, Q2API_API_KEYS=keys) as gw:
        gw.sim.enqueue(scripts.text_reply("mine"))
        async with openai_client(gw) as mine, openai_client(gw, api_key="other-client-key-7c1d") as theirs:
            response = await mine.responses.create(model=MODEL, input="secret plans")
            for attempt in (
                theirs.responses.retrieve(response.id),
                theirs.responses.input_items.list(response.id),
                theirs.responses.delete(response.id),
                theirs.responses.create(model=MODEL, input="more", previous_response_id=response.id),
            ):
                with pytest.raises(openai.NotFoundError):
                    await attempt
            assert (await mine.responses.retrieve(response.id)).output_text == "mine"
        rows = (tmp_path / "q2api.sqlite3").read_bytes()
        assert CLIENT_KEY.encode() not in rows and b"other-client-key-7c1d" not in rows


async def test_an_open_gateway_keeps_responses_for_everyone(tmp_path):
    async with open_gateway(tmp_path, Q2API_API_KEYS="") as gw:
        gw.sim.enqueue(scripts.text_reply("shared"))
        async with openai_client(gw, api_key="anything") as one, openai_client(gw, api_key="else") as other:
            response = await one.responses.create(model=MODEL, input="hi")
            assert (await other.responses.retrieve(response.id)).output_text == "shared"


async def test_a_response_expires_after_its_ttl(tmp_path):
    async with open_gateway(tmp_path, Q2API_RESPONSES_TTL_SECONDS="1") as gw:
        gw.sim.enqueue(scripts.text_reply("brief"))
        async with openai_client(gw) as client:
            response = await client.responses.create(model=MODEL, input="hi")
            assert (await client.responses.retrieve(response.id)).output_text == "brief"
            await gw.sim.wait_until(lambda: False, timeout=1.2)
            with pytest.raises(openai.NotFoundError):
                await client.responses.retrieve(response.id)


async def test_output_limits_make_an_incomplete_response(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("word " * 200, chunks=20))
    async with openai_client(gw) as client:
        response = await client.responses.create(model=MODEL, input="talk", max_output_tokens=16)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert response.max_output_tokens == 16
