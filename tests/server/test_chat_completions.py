"""The OpenAI front door through the real gateway, driven by the official `openai` SDK.

Plain text both ways, system/developer prompts, tool-call round trips with parallel calls, the
legacy functions form, an agent loop of several tool rounds, images, stop sequences and output
limits — each checked on what the client gets and on what reached the (simulated) Amazon Q
upstream. Options and surroundings: test_chat_completions_options.py; errors:
test_chat_completions_errors.py.
"""

from __future__ import annotations

import base64
import json

import pytest

from q2api.testing import scripts
from tests.support.gateway_harness import MODEL, Gateway, capture_logs, current_user_message, read_sse
from tests.support.openai_harness import PNG_BYTES, openai_client, stream_chunks, streamed_text, tool_calls_reply, user

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def streamed_tool_calls(chunks: list) -> dict[int, dict]:
    """Tool-call deltas put together by `index`, the way OpenAI clients accumulate them."""
    calls: dict[int, dict] = {}
    for chunk in chunks:
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
            call["id"] = delta.id or call["id"]
            call["name"] += delta.function.name or ""
            call["arguments"] += delta.function.arguments or ""
    return calls


# -- plain text ------------------------------------------------------------------


async def test_a_plain_completion(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("Hello from Amazon Q", chunks=4))
    with capture_logs() as logs:
        async with openai_client(gw) as client:
            completion = await client.chat.completions.create(
                model=MODEL,
                messages=[
                    {"role": "system", "content": "You are terse."},
                    {"role": "developer", "content": "Answer in English."},
                    user("hi there"),
                ],
                temperature=0.2,
                top_p=0.9,
                user="someone",
                extra_body={"an_unknown_field": True},
            )

    assert completion.object == "chat.completion" and completion.id.startswith("chatcmpl-")
    assert completion.model == MODEL
    (choice,) = completion.choices
    assert choice.message.role == "assistant" and choice.message.content == "Hello from Amazon Q"
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    usage = completion.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    body = gw.upstream_body()
    assert "hi there" in current_user_message(body)["content"]
    history_text = json.dumps(body["conversationState"]["history"])
    assert "You are terse." in history_text and "Answer in English." in history_text
    (line,) = [line for line in logs.lines if line.message.startswith("POST /v1/chat/completions")]
    assert line.extra["status"] == 200 and line.extra["model"] == MODEL and line.extra["stop_reason"] == "end_turn"


async def test_a_streamed_completion_with_usage(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("Streaming, one piece at a time.", chunks=6, delay=0.01))
    async with openai_client(gw) as client:
        chunks = await stream_chunks(client, messages=[user("stream please")], stream_options={"include_usage": True})

    assert chunks[0].choices[0].delta.role == "assistant"
    assert streamed_text(chunks) == "Streaming, one piece at a time."
    assert len({chunk.id for chunk in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    finishing = [chunk for chunk in chunks if chunk.choices and chunk.choices[0].finish_reason]
    assert [chunk.choices[0].finish_reason for chunk in finishing] == ["stop"]
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens > 0
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens
    assert all(chunk.usage is None for chunk in chunks[:-1])


async def test_a_stream_ends_with_done_and_sends_no_usage_unless_asked(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("raw", chunks=2))
    async with (
        gw.http() as http,
        http.stream(
            "POST", "/v1/chat/completions", json={"model": MODEL, "stream": True, "messages": [user("hi")]}
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        data = [event.data async for event in read_sse(response)]
    assert data[-1] == "[DONE]"
    chunks = [json.loads(item) for item in data[:-1]]
    assert all("usage" not in chunk for chunk in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


# -- tools -----------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_parallel_tool_calls_round_trip(gw: Gateway, stream: bool):
    gw.sim.enqueue(
        tool_calls_reply(
            ("tooluse_paris", "get_weather", {"city": "Paris"}),
            ("tooluse_rome", "get_weather", {"city": "Rome"}),
            text_before="Checking both.",
        ),
        scripts.text_reply("Paris is sunny, Rome is rainy."),
    )
    question = [user("Weather in Paris and Rome?")]
    async with openai_client(gw) as client:
        if stream:
            chunks = await stream_chunks(client, messages=question, tools=[WEATHER])
            calls = [streamed_tool_calls(chunks)[index] for index in (0, 1)]
            finish = [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1]
            text = streamed_text(chunks)
        else:
            completion = await client.chat.completions.create(model=MODEL, messages=question, tools=[WEATHER])
            message = completion.choices[0].message
            calls = [
                {"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls
            ]
            finish, text = completion.choices[0].finish_reason, message.content
        assert finish == "tool_calls" and text == "Checking both."
        assert [call["id"] for call in calls] == ["tooluse_paris", "tooluse_rome"]
        assert [json.loads(call["arguments"]) for call in calls] == [{"city": "Paris"}, {"city": "Rome"}]

        answer = await client.chat.completions.create(
            model=MODEL,
            tools=[WEATHER],
            messages=[
                *question,
                {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]},
                        }
                        for c in calls
                    ],
                },
                {"role": "tool", "tool_call_id": "tooluse_paris", "content": "sunny, 24 °C"},
                {"role": "tool", "tool_call_id": "tooluse_rome", "content": [{"type": "text", "text": "rainy"}]},
            ],
        )
    assert answer.choices[0].message.content == "Paris is sunny, Rome is rainy."
    body = gw.upstream_body()
    results = current_user_message(body)["userInputMessageContext"]["toolResults"]
    assert [(r["toolUseId"], r["content"][0]["text"]) for r in results] == [
        ("tooluse_paris", "sunny, 24 °C"),
        ("tooluse_rome", "rainy"),
    ]
    assistant = body["conversationState"]["history"][-1]["assistantResponseMessage"]
    assert [use["toolUseId"] for use in assistant["toolUses"]] == ["tooluse_paris", "tooluse_rome"]


async def test_tool_choice_and_parallel_tool_calls_are_accepted_and_reported(gw: Gateway):
    gw.sim.enqueue(scripts.tool_reply("get_weather", {"city": "Oslo"}), scripts.text_reply("no tools here"))
    with capture_logs() as logs:
        async with openai_client(gw) as client:
            forced = await client.chat.completions.create(
                model=MODEL,
                messages=[user("Oslo?")],
                tools=[WEATHER],
                tool_choice={"type": "function", "function": {"name": "get_weather"}},
                parallel_tool_calls=False,
            )
            none = await client.chat.completions.create(
                model=MODEL, messages=[user("no tools")], tools=[WEATHER], tool_choice="none"
            )
    assert forced.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert none.choices[0].message.content == "no tools here"
    offered = current_user_message(gw.upstream_body()).get("userInputMessageContext", {}).get("tools", [])
    assert "get_weather" not in json.dumps(offered)  # tool_choice none: nothing real offered upstream
    request_ids = {line.extra["request_id"] for line in logs.lines if line.message.startswith("POST /v1/chat")}
    assert len(request_ids) == 2


async def test_the_legacy_functions_form(gw: Gateway):
    gw.sim.enqueue(scripts.tool_reply("get_weather", {"city": "Lima"}), scripts.text_reply("Lima: mild."))
    function = WEATHER["function"]
    async with openai_client(gw) as client:
        first = await client.chat.completions.create(
            model=MODEL, messages=[user("Lima?")], functions=[function], function_call="auto"
        )
        call = first.choices[0].message.function_call
        assert first.choices[0].finish_reason == "function_call"
        assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Lima"}
        second = await client.chat.completions.create(
            model=MODEL,
            functions=[function],
            messages=[
                user("Lima?"),
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": call.name, "arguments": call.arguments},
                },
                {"role": "function", "name": "get_weather", "content": "mild, 19 °C"},
            ],
        )
    assert second.choices[0].message.content == "Lima: mild."
    (result,) = current_user_message(gw.upstream_body())["userInputMessageContext"]["toolResults"]
    assert result["content"][0]["text"] == "mild, 19 °C"


async def test_an_agent_loop_of_several_tool_rounds_runs_to_completion(gw: Gateway):
    """An OpenAI-speaking agent: call the tools the model asks for until it answers in text."""
    cities = ["Paris", "Rome", "Oslo"]
    gw.sim.enqueue(
        *(scripts.tool_reply("get_weather", {"city": city}, tool_use_id=f"tooluse_{city}") for city in cities),
        scripts.text_reply("All three checked."),
    )
    messages: list[dict] = [user("Check Paris, Rome and Oslo one by one.")]
    rounds = 0
    async with openai_client(gw) as client:
        while True:
            chunks = await stream_chunks(client, messages=messages, tools=[WEATHER])
            calls = streamed_tool_calls(chunks)
            text = streamed_text(chunks)
            if not calls:
                break
            rounds += 1
            messages.append(
                {
                    "role": "assistant",
                    "content": text or None,
                    "tool_calls": [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]},
                        }
                        for c in calls.values()
                    ],
                }
            )
            for call in calls.values():
                city = json.loads(call["arguments"])["city"]
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": f"{city}: fine"})
            assert rounds <= len(cities)
    assert rounds == 3 and text == "All three checked."
    body = gw.upstream_body()
    answered = [
        result["toolUseId"]
        for entry in [*body["conversationState"]["history"], body["conversationState"]["currentMessage"]]
        for result in entry.get("userInputMessage", {}).get("userInputMessageContext", {}).get("toolResults", [])
    ]
    assert answered == [f"tooluse_{city}" for city in cities]


# -- content and limits ----------------------------------------------------------------


async def test_an_image_data_url_reaches_amazon_q(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("A single pixel."))
    data_url = "data:image/png;base64," + base64.b64encode(PNG_BYTES).decode()
    async with openai_client(gw) as client:
        completion = await client.chat.completions.create(
            model=MODEL,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": data_url, "detail": "low"}},
                    ],
                }
            ],
        )
    assert completion.choices[0].message.content == "A single pixel."
    current = current_user_message(gw.upstream_body())
    assert current["images"] == [{"format": "png", "source": {"bytes": base64.b64encode(PNG_BYTES).decode()}}]
    assert "What is this?" in current["content"]


async def test_stop_sequences_cut_the_reply(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("one, two, STOP, three", chunks=5), scripts.text_reply("alpha|beta", chunks=3))
    async with openai_client(gw) as client:
        listed = await client.chat.completions.create(model=MODEL, messages=[user("count")], stop=["STOP", "END"])
        chunks = await stream_chunks(client, messages=[user("letters")], stop="|")
    assert listed.choices[0].message.content == "one, two, " and listed.choices[0].finish_reason == "stop"
    assert streamed_text(chunks) == "alpha"
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "stop"


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
async def test_an_output_limit_ends_with_length(gw: Gateway, field: str):
    gw.sim.enqueue(scripts.text_reply("word " * 400, chunks=20))
    async with openai_client(gw) as client:
        completion = await client.chat.completions.create(model=MODEL, messages=[user("ramble")], **{field: 10})
    assert completion.choices[0].finish_reason == "length"
    assert 0 < len(completion.choices[0].message.content) < len("word " * 400)
