"""Prompt caching told honestly, and the credits of each reply (docs/protocol.md#prompt-caching-and-metering), end to end.

The simulator (`usage_frames = True`) ends each reply the way A13 describes: `metadataEvent`
with cache figures computed from the request's cache points, `meteringEvent`, then
`contextUsageEvent`. What the client sees must be exactly what it reports.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import orjson
import pytest

from q2api.testing import scripts
from tests.support.claude_code_request import claude_code_request
from tests.support.gateway_harness import ADMIN_KEY, CLIENT_KEY, MODEL, Gateway, capture_logs, open_gateway, user
from tests.support.metrics_scrape import Scrape

CACHE_POINT = {"type": "default"}


def closing_frames(gw: Gateway) -> None:
    gw.sim.usage_frames = True


async def send_raw(gw: Gateway, body: dict[str, Any]) -> dict[str, Any]:
    """A non-streaming Messages call with a body exactly as given (Claude Code's, cache_control included)."""
    async with gw.http() as http:
        response = await http.post("/v1/messages", json={**body, "stream": False})
    assert response.status_code == 200, response.text
    return response.json()


def cache_points_sent(body: dict[str, Any]) -> list[str]:
    state = body["conversationState"]
    places = [
        f"history.{i}" for i, entry in enumerate(state.get("history", [])) if "cachePoint" in next(iter(entry.values()))
    ]
    current = state["currentMessage"]["userInputMessage"]
    if "cachePoint" in current:
        places.append("current")
    tools = current.get("userInputMessageContext", {}).get("tools", [])
    places += [f"tools.{i}" for i, tool in enumerate(tools) if "cachePoint" in tool]
    return places


# -- prompt caching ---------------------------------------------------------------------


async def test_a_repeated_claude_code_request_reports_the_upstreams_cache_reads(gw: Gateway) -> None:
    closing_frames(gw)
    body = claude_code_request(size_kb=60, model="claude-sonnet-5-5")
    first = await send_raw(gw, body)
    sent = gw.sim.requests[-1].body
    # Claude Code's breakpoints (two system blocks, a message block) became cache points: the
    # system prompt's history message, and the Amazon Q message that Claude message went into.
    marked = [
        index for index, message in enumerate(body["messages"]) if "cache_control" in orjson.dumps(message).decode()
    ]
    assert len(marked) == 1
    assert cache_points_sent(sent)[0] == "history.0" and len(cache_points_sent(sent)) == 2
    assert sent["conversationState"]["history"][0]["userInputMessage"]["cachePoint"] == CACHE_POINT
    written = first["usage"]["cache_creation_input_tokens"]
    assert written > 0 and first["usage"]["cache_read_input_tokens"] == 0

    again = await send_raw(gw, copy.deepcopy(body))
    assert again["usage"]["cache_read_input_tokens"] == written  # what the upstream reported, exactly
    assert again["usage"]["cache_creation_input_tokens"] == 0
    assert gw.sim.accounting.reads == 1


async def test_a_request_without_cache_points_reports_no_cache_figures(gw: Gateway) -> None:
    closing_frames(gw)
    for _ in range(2):
        message = await gw.client.messages.create(model=MODEL, max_tokens=64, messages=[user("same words")])
        assert message.usage.cache_read_input_tokens == 0
        assert message.usage.cache_creation_input_tokens == 0
    assert cache_points_sent(gw.sim.requests[-1].body) == []


async def test_streamed_usage_carries_the_cache_figures(gw: Gateway) -> None:
    gw.sim.enqueue(
        scripts.stream(
            scripts.conversation_event(),
            scripts.text_events("hi"),
            scripts.usage_event(10, 2, cache_read=900, cache_write=40),
        )
    )
    async with gw.client.messages.stream(model=MODEL, max_tokens=64, messages=[user("x")]) as events:
        message = await events.get_final_message()
    assert (
        message.usage.input_tokens,
        message.usage.cache_read_input_tokens,
        message.usage.cache_creation_input_tokens,
    ) == (10, 900, 40)


async def test_tool_breakpoints_become_points_between_the_tools(gw: Gateway) -> None:
    tools = [
        {"name": "a", "description": "A.", "input_schema": {"type": "object"}},
        {"name": "b", "description": "B.", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}},
        {"name": "c", "description": "C.", "input_schema": {"type": "object"}},
    ]
    await send_raw(gw, {"model": MODEL, "max_tokens": 16, "messages": [user("x")], "tools": tools})
    assert cache_points_sent(gw.sim.requests[-1].body) == ["tools.2"]  # a, b, point, c


async def test_prompt_cache_off_sends_no_cache_points(tmp_path: Path) -> None:
    async with open_gateway(tmp_path, Q2API_PROMPT_CACHE="off") as gw:
        await send_raw(gw, claude_code_request(size_kb=20, model="claude-sonnet-5-5"))
        assert cache_points_sent(gw.sim.requests[-1].body) == []


async def test_more_than_four_breakpoints_is_the_anthropic_400(gw: Gateway) -> None:
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    body = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": [marked] * 5}]}
    async with gw.http() as http:
        response = await http.post("/v1/messages", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "A maximum of 4 blocks with cache_control may be provided. Found 5."
    assert gw.sim.requests == []


async def test_the_openai_door_reports_cached_tokens(gw: Gateway) -> None:
    gw.sim.enqueue(
        scripts.stream(
            scripts.conversation_event(), scripts.text_events("hi"), scripts.usage_event(10, 2, cache_read=500)
        )
    )
    client = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    async with client:
        completion = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
    assert completion.usage.prompt_tokens == 510
    assert completion.usage.prompt_tokens_details.cached_tokens == 500


# -- credits -----------------------------------------------------------------------------


async def test_credits_reach_the_log_line_metrics_activity_and_the_accounts_figure(tmp_path: Path) -> None:
    async with open_gateway(tmp_path, Q2API_ADMIN_KEY=ADMIN_KEY) as gw:
        gw.sim.enqueue(
            scripts.stream(scripts.conversation_event(), scripts.text_events("one"), scripts.metering_event(0.25)),
            scripts.stream(scripts.conversation_event(), scripts.text_events("two")),  # no metering event
        )
        async with gw.http() as http:
            metered_before = Scrape((await http.get("/metrics")).text).total(
                "q2api_credits_total", model="claude-sonnet-5.5"
            )
        admin = httpx2.AsyncClient(base_url=gw.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=20)
        async with admin:
            before = (await admin.get("/admin/api/accounts")).json()["accounts"][0]["usage"]["used"]
            with capture_logs() as logs:
                await gw.client.messages.create(model=MODEL, max_tokens=16, messages=[user("a")])
                await gw.client.messages.create(model=MODEL, max_tokens=16, messages=[user("b")])
                lines = [line for line in logs.request_lines() if line.extra.get("status") == 200]
            assert [line.extra["credits"] for line in lines] == ["0.25", "-"]
            activity = (await admin.get("/admin/api/activity")).json()["requests"]
            assert [entry["credits"] for entry in activity] == [None, 0.25]
            # The account's known figure moved by the metered amount, before the next getUsageLimits read.
            after = (await admin.get("/admin/api/accounts")).json()["accounts"][0]["usage"]["used"]
            assert after == pytest.approx(before + 0.25)
        async with gw.http() as http:
            scrape = Scrape((await http.get("/metrics")).text)
        metered = scrape.total("q2api_credits_total", model="claude-sonnet-5.5") - metered_before
        assert metered == pytest.approx(0.25)  # the counter is this process's: other tests' credits are in it too
        assert {series["account"] for series in scrape.series("q2api_credits_total")} == {"environment"}


async def test_a_web_search_turns_credits_add_up_over_its_calls(gw: Gateway) -> None:
    gw.sim.enqueue(
        scripts.tool_reply("web_search", {"query": "q"}).then(scripts.metering_event(0.5)),
        scripts.stream(scripts.conversation_event(), scripts.text_events("found"), scripts.metering_event(0.25)),
    )
    with capture_logs() as logs:
        await gw.client.messages.create(
            model=MODEL,
            max_tokens=64,
            messages=[user("?")],
            tools=[{"type": "web_search_20250305", "name": "web_search"}],
        )
    assert logs.request_lines()[-1].extra["credits"] == "0.75"


async def test_the_simulators_closing_frames_give_credits_and_context(gw: Gateway) -> None:
    closing_frames(gw)
    with capture_logs() as logs:
        message = await gw.client.messages.create(model=MODEL, max_tokens=64, messages=[user("hello")])
    credits = logs.request_lines()[-1].extra["credits"]
    assert credits != "-" and float(credits) > 0.01
    assert message.usage.input_tokens > 0
    with pytest.raises(anthropic.BadRequestError):  # the line of a refused request says nothing was metered
        with capture_logs() as refused:
            await gw.client.messages.create(model=MODEL, max_tokens=64, messages=[])
    assert refused.request_lines()[-1].extra["credits"] == "-"
