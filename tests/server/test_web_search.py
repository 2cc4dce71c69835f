"""Anthropic's web search tool through the gateway: the official SDK → q2api → the simulated Amazon Q and its `/mcp`.

The model decides to search (it calls the `web_search` tool the gateway offers it), the gateway
runs Kiro's MCP search on the serving account, the client sees `server_tool_use` and
`web_search_tool_result` blocks, and the model's turn goes on in a second upstream call with the
results — one Claude message.
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from q2api.testing import scripts
from q2api.testing.simulated_mcp import search_results
from q2api.testing.simulated_upstream import SIM_PROFILE_ARN
from tests.support.gateway_harness import CLIENT_KEY, MODEL, Gateway, current_user_message, open_gateway, user
from tests.support.search_replies import answer, search_call

WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def block_types(message: Any) -> list[str]:
    return [block.type for block in message.content]


def tool_results_sent(body: dict[str, Any]) -> list[dict[str, Any]]:
    return current_user_message(body).get("userInputMessageContext", {}).get("toolResults", [])


# -- the model searches ---------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_the_sdk_gets_search_blocks_and_the_answer_in_one_message(tmp_path, stream: bool) -> None:
    query = "python 3.14 release date"
    async with open_gateway(tmp_path, AMAZONQ_AUTH_METHOD="social") as gw:
        url = search_results(query)[0]["url"]
        gw.sim.enqueue(search_call(query), answer("Python 3.14 came out in October.", cite=url))
        kwargs: dict[str, Any] = {
            "model": MODEL,
            "max_tokens": 512,
            "messages": [user("When was Python 3.14 released?")],
            "tools": [WEB_SEARCH],
        }
        if stream:
            async with gw.client.messages.stream(**kwargs) as events:
                raw = [event async for event in events]
                message = await events.get_final_message()
            starts = [event for event in raw if event.type == "content_block_start"]
            assert [event.index for event in starts] == [0, 1, 2, 3]  # consecutive, one message
        else:
            message = await gw.client.messages.create(**kwargs)

    assert block_types(message) == ["text", "server_tool_use", "web_search_tool_result", "text"]
    used, result = message.content[1], message.content[2]
    assert used.id.startswith("srvtoolu_") and used.name == "web_search" and used.input == {"query": query}
    assert result.tool_use_id == used.id
    assert [(item.type, item.title, item.url) for item in result.content] == [
        ("web_search_result", r["title"], r["url"]) for r in search_results(query)
    ]
    assert result.content[0].page_age == "January 2, 2026"
    assert message.content[3].text == "Python 3.14 came out in October."
    assert message.content[3].citations[0].url == url
    assert message.content[3].citations[0].title == search_results(query)[0]["title"]
    assert message.stop_reason == "end_turn"
    assert message.usage.server_tool_use.web_search_requests == 1

    # The MCP call went to the serving account with its profile ARN (body root and header, A11).
    headers, body = gw.sim.mcp.requests[0]
    assert body["method"] == "tools/call" and body["params"] == {"name": "web_search", "arguments": {"query": query}}
    assert body["profileArn"] == SIM_PROFILE_ARN and headers["x-amzn-kiro-profile-arn"] == SIM_PROFILE_ARN
    assert body["id"].startswith("web_search_tooluse_")
    # The second upstream call continues the model's turn with the results.
    assert len(gw.sim.requests) == 2
    second = gw.sim.requests[1].body
    turn = second["conversationState"]["history"][-1]["assistantResponseMessage"]
    assert turn["content"] == "Let me search."
    assert turn["toolUses"] == [{"toolUseId": "tooluse_search_1", "name": "web_search", "input": {"query": query}}]
    results = tool_results_sent(second)
    assert results[0]["toolUseId"] == "tooluse_search_1" and results[0]["status"] == "success"
    assert "Snippet 1 about python 3.14 release date." in results[0]["content"][0]["text"]


async def test_search_plus_client_tools_completes_a_tool_round(gw: Gateway) -> None:
    gw.sim.enqueue(
        search_call("weather in Paris today", text_before=None),
        scripts.tool_reply("get_weather", {"city": "Paris"}, tool_use_id="tooluse_weather"),
        answer("It is sunny in Paris, 21 °C."),
    )
    tools = [WEB_SEARCH, WEATHER_TOOL]
    first = await gw.client.messages.create(
        model=MODEL, max_tokens=256, messages=[user("Weather in Paris?")], tools=tools
    )
    assert block_types(first) == ["server_tool_use", "web_search_tool_result", "tool_use"]
    assert first.stop_reason == "tool_use"
    call = first.content[2]
    assert call.name == "get_weather" and call.input == {"city": "Paris"}

    history = [
        user("Weather in Paris?"),
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny, 21 C"}]},
    ]
    final = await gw.client.messages.create(model=MODEL, max_tokens=256, messages=history, tools=tools)
    assert final.content[0].text == "It is sunny in Paris, 21 °C." and final.stop_reason == "end_turn"

    third = gw.sim.requests[2].body
    earlier = third["conversationState"]["history"][-1]["assistantResponseMessage"]
    # The search the client was shown travels back as context; the client's tool round stays a tool round.
    assert "[I searched the web for: weather in Paris today]" in earlier["content"]
    assert "example1.test" in earlier["content"]
    assert [use["name"] for use in earlier["toolUses"]] == ["get_weather"]
    assert tool_results_sent(third)[0]["content"] == [{"text": "sunny, 21 C"}]


async def test_max_uses_is_enforced_with_the_anthropic_error_block(gw: Gateway) -> None:
    gw.sim.enqueue(
        search_call("first query", "tooluse_1"),
        search_call("second query", "tooluse_2", text_before=None),
        answer("Done with one search."),
    )
    tool = {**WEB_SEARCH, "max_uses": 1}
    message = await gw.client.messages.create(
        model=MODEL, max_tokens=256, messages=[user("search twice")], tools=[tool]
    )
    assert block_types(message) == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    assert message.content[4].content.type == "web_search_tool_result_error"
    assert message.content[4].content.error_code == "max_uses_exceeded"
    assert message.usage.server_tool_use.web_search_requests == 1
    assert gw.sim.mcp.queries == ["first query"]
    refused = tool_results_sent(gw.sim.requests[2].body)[0]
    assert refused["status"] == "error" and "max_uses_exceeded" in refused["content"][0]["text"]


async def test_a_search_that_finds_nothing_is_an_empty_result(gw: Gateway) -> None:
    gw.sim.mcp.mode = "empty"
    gw.sim.enqueue(search_call("zxqv nothing"), answer("Nothing found."))
    message = await gw.client.messages.create(model=MODEL, max_tokens=64, messages=[user("?")], tools=[WEB_SEARCH])
    assert message.content[2].type == "web_search_tool_result" and message.content[2].content == []
    assert message.usage.server_tool_use.web_search_requests == 1
    assert "found no results" in tool_results_sent(gw.sim.requests[1].body)[0]["content"][0]["text"]


@pytest.mark.parametrize("mode", ["rpc_error", "tool_error", "http_error"])
async def test_a_failed_search_is_the_error_shape_and_the_turn_goes_on(gw: Gateway, mode: str) -> None:
    gw.sim.mcp.mode = mode
    gw.sim.enqueue(search_call("anything"), answer("The search is down; from memory: ..."))
    message = await gw.client.messages.create(model=MODEL, max_tokens=64, messages=[user("?")], tools=[WEB_SEARCH])
    error = message.content[2].content
    assert (error.type, error.error_code) == ("web_search_tool_result_error", "unavailable")
    assert message.content[3].text.startswith("The search is down")
    assert message.usage.server_tool_use.web_search_requests == 0  # a failed search is not counted
    assert tool_results_sent(gw.sim.requests[1].body)[0]["status"] == "error"


async def test_allowed_domains_filter_the_results(gw: Gateway) -> None:
    gw.sim.enqueue(search_call("docs"), answer("ok"))
    tool = {**WEB_SEARCH, "allowed_domains": ["example2.test"]}
    message = await gw.client.messages.create(model=MODEL, max_tokens=64, messages=[user("?")], tools=[tool])
    assert [item.url for item in message.content[2].content] == [search_results("docs")[1]["url"]]
    spec = current_user_message(gw.sim.requests[0].body)["userInputMessageContext"]["tools"][0]
    assert "example2.test" in spec["toolSpecification"]["description"]


async def test_bad_web_search_options_are_a_400_naming_the_field(gw: Gateway) -> None:
    tool = {**WEB_SEARCH, "allowed_domains": ["a.test"], "blocked_domains": ["b.test"]}
    with pytest.raises(anthropic.BadRequestError) as caught:
        await gw.client.messages.create(model=MODEL, max_tokens=64, messages=[user("?")], tools=[tool])
    assert "tools.0" in caught.value.message and "blocked_domains" in caught.value.message
    with pytest.raises(anthropic.BadRequestError) as caught:
        await gw.client.messages.create(
            model=MODEL, max_tokens=64, messages=[user("?")], tools=[{**WEB_SEARCH, "max_uses": 0}]
        )
    assert "tools.0.max_uses" in caught.value.message
    assert gw.sim.requests == []


# -- Claude Code's WebSearch request ----------------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_a_request_that_only_asks_for_a_search_searches_at_once(gw: Gateway, stream: bool) -> None:
    gw.sim.enqueue(answer("Here is what I found about the rust release."))
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 512,
        "system": "You are an assistant for performing a web search tool use",
        "messages": [user("Perform a web search for the query: rust 1.95 release")],
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 8}],
    }
    if stream:
        async with gw.client.messages.stream(**kwargs) as events:
            message = await events.get_final_message()
    else:
        message = await gw.client.messages.create(**kwargs)
    assert block_types(message) == ["server_tool_use", "web_search_tool_result", "text"]
    assert message.content[0].input == {"query": "rust 1.95 release"}
    assert message.usage.server_tool_use.web_search_requests == 1
    assert gw.sim.mcp.queries == ["rust 1.95 release"]
    # One model call, not two: the query was not the model's to decide.
    assert len(gw.sim.requests) == 1
    body = gw.sim.requests[0].body
    call = body["conversationState"]["history"][-1]["assistantResponseMessage"]["toolUses"][0]
    assert call["name"] == "web_search" and call["input"] == {"query": "rust 1.95 release"}
    assert tool_results_sent(body)[0]["toolUseId"] == call["toolUseId"]


# -- the OpenAI door -------------------------------------------------------------------


async def test_openai_web_search_options_run_the_same_search(gw: Gateway) -> None:
    gw.sim.enqueue(search_call("openai door query", text_before=None), answer("Answer from the web."))
    client = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    async with client:
        completion = await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "search something"}],
            web_search_options={"user_location": {"type": "approximate", "approximate": {"city": "Lyon"}}},
        )
    assert completion.choices[0].message.content == "Answer from the web."
    assert completion.choices[0].finish_reason == "stop"
    assert gw.sim.mcp.queries == ["openai door query"]
    spec = current_user_message(gw.sim.requests[0].body)["userInputMessageContext"]["tools"][0]
    assert spec["toolSpecification"]["name"] == "web_search"
    assert "Lyon" in spec["toolSpecification"]["description"]


async def test_a_model_that_keeps_searching_is_paused_after_ten_calls(gw: Gateway) -> None:
    calls = iter(range(100))
    gw.sim.responder = lambda record: search_call(f"query {next(calls)}", f"tooluse_{len(gw.sim.requests)}", None)
    message = await gw.client.messages.create(model=MODEL, max_tokens=256, messages=[user("?")], tools=[WEB_SEARCH])
    assert message.stop_reason == "pause_turn"  # the client may send the turn back to go on
    assert len(gw.sim.requests) == 10
    assert message.usage.server_tool_use.web_search_requests == 3  # max_uses 3; the rest were refused
    assert block_types(message).count("server_tool_use") == 10


async def test_a_client_that_leaves_during_a_search_stops_the_turn(gw: Gateway) -> None:
    gw.sim.mcp.delay = 30
    gw.sim.enqueue(search_call("slow search"), answer("never sent"))
    body = {"model": MODEL, "max_tokens": 64, "stream": True, "messages": [user("?")], "tools": [WEB_SEARCH]}
    async with gw.http() as http, http.stream("POST", "/v1/messages", json=body) as response:
        async for line in response.aiter_lines():
            if "server_tool_use" in line:
                break  # the search has started: leave
    assert await gw.sim.wait_until(lambda: gw.sim.mcp.cancelled == 1, timeout=10)
    assert len(gw.sim.requests) == 1  # the turn was not continued after the client left
