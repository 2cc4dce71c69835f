"""OpenAI's web search tool in the Responses door: the official `openai` SDK → q2api → the simulated Amazon Q and its `/mcp`.

The request's `web_search` tool becomes the Claude door's web search (the same relay, the same
Kiro MCP search); the reply shows the search as a `web_search_call` output item with its stream
events, and the answer's citations as `url_citation` annotations — in the shapes of the SDK's
types (openai/types/responses/: `ResponseFunctionWebSearch`, `ResponseWebSearchCall*Event`,
`AnnotationURLCitation`), which the SDK's `responses.stream()` helper parses here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from q2api.testing import scripts
from q2api.testing.simulated_mcp import search_results
from tests.support.gateway_harness import MODEL, Gateway, current_user_message, read_sse
from tests.support.openai_harness import openai_client
from tests.support.search_replies import answer, search_call

QUERY = "python 3.14 release date"
ANSWER = "Python 3.14 came out in October."
SOURCES = ["web_search_call.action.sources"]


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return current_user_message(body).get("userInputMessageContext", {}).get("toolResults", [])


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_a_search_is_a_web_search_call_item_and_the_answer_cites_it(gw: Gateway, stream: bool):
    url = search_results(QUERY)[0]["url"]
    gw.sim.enqueue(search_call(QUERY), answer(ANSWER, cite=url))
    request: dict[str, Any] = {
        "model": MODEL,
        "input": "When was Python 3.14 released?",
        "tools": [{"type": "web_search", "search_context_size": "low"}],
        "include": SOURCES,
    }
    async with openai_client(gw) as client:
        if stream:
            async with client.responses.stream(**request) as events:
                seen = [event async for event in events]
                response = await events.get_final_response()
            kinds = [event.type for event in seen]
            search = kinds.index("response.web_search_call.in_progress")
            assert kinds[search - 1 : search + 4] == [
                "response.output_item.added",
                "response.web_search_call.in_progress",
                "response.web_search_call.searching",
                "response.web_search_call.completed",
                "response.output_item.done",
            ]
            assert [event.sequence_number for event in seen] == list(range(len(seen)))
            added = seen[search - 1]
            assert added.item.type == "web_search_call" and added.item.status == "in_progress"
            assert {seen[n].item_id for n in range(search, search + 3)} == {added.item.id}
            (annotation_event,) = [event for event in seen if event.type == "response.output_text.annotation.added"]
            assert annotation_event.annotation.url == url and annotation_event.annotation_index == 0
        else:
            response = await client.responses.create(**request)

    assert response.status == "completed"
    assert [item.type for item in response.output] == ["message", "web_search_call", "message"]
    call = response.output[1]
    assert call.id.startswith("ws_") and call.status == "completed"
    assert call.action.type == "search" and call.action.query == QUERY
    assert [source.url for source in call.action.sources or ()] == [r["url"] for r in search_results(QUERY)]
    message = response.output[2]
    assert message.content[0].text == ANSWER
    (citation,) = message.content[0].annotations
    assert citation.type == "url_citation" and citation.url == url
    assert citation.title == search_results(QUERY)[0]["title"]
    assert ANSWER[citation.start_index : citation.end_index] == ANSWER[:20]  # the text Amazon Q said it cites
    assert response.output_text == "Let me search." + ANSWER
    assert response.tools[0].type == "web_search"

    # One search through Kiro's MCP, and the model's turn continued with its results.
    assert gw.sim.mcp.queries == [QUERY]
    assert len(gw.sim.requests) == 2
    (result,) = tool_results(gw.sim.requests[1].body)
    assert result["status"] == "success" and "Snippet 1 about python 3.14 release date." in result["content"][0]["text"]


async def test_sources_only_when_included_and_the_options_reach_the_model(gw: Gateway):
    """`web_search_preview` with a location, chosen by `tool_choice` (which Amazon Q cannot force: the model is offered it)."""
    gw.sim.enqueue(search_call("docs"), answer("ok"))
    tool = {
        "type": "web_search_preview",
        "user_location": {"type": "approximate", "city": "Lyon", "country": "FR"},
    }
    async with openai_client(gw) as client:
        response = await client.responses.create(
            model=MODEL, input="?", tools=[tool], tool_choice={"type": "web_search_preview"}
        )
    call = response.output[1]
    assert call.type == "web_search_call" and call.action.query == "docs" and call.action.sources is None
    spec = current_user_message(gw.sim.requests[0].body)["userInputMessageContext"]["tools"][0]
    assert spec["toolSpecification"]["name"] == "web_search"
    assert "Lyon, FR" in spec["toolSpecification"]["description"]


async def test_allowed_domains_filter_the_sources(gw: Gateway):
    gw.sim.enqueue(search_call("docs"), answer("ok"))
    tool = {"type": "web_search", "filters": {"allowed_domains": ["example2.test"]}}
    async with openai_client(gw) as client:
        response = await client.responses.create(model=MODEL, input="?", tools=[tool], include=SOURCES)
    assert [source.url for source in response.output[1].action.sources] == [search_results("docs")[1]["url"]]
    spec = current_user_message(gw.sim.requests[0].body)["userInputMessageContext"]["tools"][0]
    assert "example2.test" in spec["toolSpecification"]["description"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_a_failed_search_is_a_failed_item_and_the_response_completes(gw: Gateway, stream: bool):
    gw.sim.mcp.mode = "rpc_error"
    gw.sim.enqueue(search_call("anything"), answer("The search is down; from memory: ..."))
    request: dict[str, Any] = {"model": MODEL, "input": "?", "tools": [{"type": "web_search"}], "include": SOURCES}
    async with openai_client(gw) as client:
        if stream:
            async with client.responses.stream(**request) as events:
                kinds = [event.type async for event in events]
                response = await events.get_final_response()
            assert "response.web_search_call.searching" in kinds
            assert "response.web_search_call.completed" not in kinds
        else:
            response = await client.responses.create(**request)
    assert response.status == "completed" and response.error is None
    call = response.output[1]
    assert call.type == "web_search_call" and call.status == "failed" and call.action.sources is None
    assert response.output[2].content[0].text.startswith("The search is down")
    assert tool_results(gw.sim.requests[1].body)[0]["status"] == "error"


async def test_previous_response_id_after_a_search_carries_it_as_context(gw: Gateway):
    async with openai_client(gw) as client:
        gw.sim.enqueue(search_call(QUERY, text_before=None), answer(ANSWER))
        first = await client.responses.create(
            model=MODEL, input="When was Python 3.14 released?", tools=[{"type": "web_search"}], include=SOURCES
        )
        assert [item.type for item in first.output] == ["web_search_call", "message"]
        gw.sim.enqueue(scripts.text_reply("In October 2025, as I found."))
        second = await client.responses.create(
            model=MODEL,
            input="And which month was that?",
            previous_response_id=first.id,
            tools=[{"type": "web_search"}],
        )
        assert second.output_text == "In October 2025, as I found." and second.status == "completed"
        # The stored response keeps the search item as it was given.
        stored = await client.responses.retrieve(first.id)
        assert stored.output[0].type == "web_search_call" and stored.output[0].action.query == QUERY

    history = gw.sim.requests[-1].body["conversationState"]["history"]
    said = json.dumps(history)
    assert f"[I searched the web for: {QUERY}]" in said
    assert search_results(QUERY)[0]["url"] in said  # the sources the client kept reach the model
    assert ANSWER in said
    assert "And which month was that?" in current_user_message(gw.sim.requests[-1].body)["content"]
    assert len(gw.sim.mcp.queries) == 1  # the continuation searched nothing again


async def test_a_web_search_call_sent_back_as_input_is_context_too(gw: Gateway):
    """A client that keeps its own history (`store: false`) sends the search item back as input."""
    gw.sim.enqueue(scripts.text_reply("ok"))
    history = [
        {"role": "user", "content": "news about rust?"},
        {
            "type": "web_search_call",
            "id": "ws_earlier",
            "status": "completed",
            "action": {"type": "search", "query": "rust news", "sources": [{"type": "url", "url": "https://r.test/"}]},
        },
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Rust 2.0 is out."}]},
        {"role": "user", "content": "thanks"},
    ]
    async with openai_client(gw) as client:
        response = await client.responses.create(model=MODEL, input=history, store=False)
    assert response.output_text == "ok"
    said = json.dumps(gw.sim.requests[0].body["conversationState"]["history"])
    assert "[I searched the web for: rust news]" in said and "https://r.test/" in said


async def test_the_raw_stream_names_the_search_events(gw: Gateway):
    """Codex reads the SSE `event:` line: the search events carry their names and sequence numbers."""
    gw.sim.enqueue(search_call("q", text_before=None), answer("a"))
    body = {"model": MODEL, "input": "?", "tools": [{"type": "web_search"}], "stream": True}
    async with gw.http() as http, http.stream("POST", "/v1/responses", json=body) as response:
        events = [event async for event in read_sse(response)]
    data = [json.loads(event.data) for event in events]
    assert all(item["type"] == event.name for item, event in zip(data, events, strict=True))
    searching = [item for item in data if item["type"].startswith("response.web_search_call.")]
    assert [item["type"] for item in searching] == [
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
    ]
    assert all(set(item) == {"type", "item_id", "output_index", "sequence_number"} for item in searching)
    assert events[-1].name == "response.completed"
