"""The gateway's success paths, end to end: the official SDK → q2api on loopback → the simulated Amazon Q.

Each test checks both ends of the relay: what the SDK hands its caller, and what
Amazon Q received (the simulator records every GenerateAssistantResponse body).
"""

from __future__ import annotations

import asyncio
import base64
import re
from typing import Any

import anthropic
import pytest

from q2api.testing import scripts
from q2api.testing.scripts import StreamReply
from tests.support.gateway_harness import (
    CLIENT_KEY,
    MODEL,
    Gateway,
    capture_logs,
    current_user_message,
    find_secrets,
    open_gateway,
    user,
)

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["C", "F"]}},
        "required": ["city"],
    },
}
# An MCP-style name Amazon Q would refuse twice over: longer than 64 characters, and dots.
ODD_TOOL_NAME = "mcp__acme.internal.tools__" + "look_up_the_customer_record_by_email_address_and_region"
assert len(ODD_TOOL_NAME) > 64
Q_IDENTIFIER = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def tool_names_sent_upstream(body: dict[str, Any]) -> list[str]:
    context = current_user_message(body).get("userInputMessageContext", {})
    return [tool["toolSpecification"]["name"] for tool in context.get("tools", [])]


def assistant_tool_uses(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The toolUses of every assistant turn in the upstream history, in order."""
    uses: list[dict[str, Any]] = []
    for entry in body["conversationState"].get("history", []):
        uses += entry.get("assistantResponseMessage", {}).get("toolUses", [])
    return uses


# -- a plain request ----------------------------------------------------------


async def test_create_returns_the_upstream_text_and_sends_a_conversation_state(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("Foxes are quick and brown.", chunks=4))

    message = await gw.client.messages.create(
        model=MODEL, max_tokens=200, messages=[user("Tell me one fact about foxes")]
    )

    assert message.type == "message" and message.role == "assistant"
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "Foxes are quick and brown."
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert message.id.startswith("msg_")
    assert message.model == MODEL
    assert re.fullmatch(r"req_[0-9a-f]{24}", message._request_id or "")

    (record,) = gw.sim.requests
    current = current_user_message(record.body)
    assert "Tell me one fact about foxes" in current["content"]
    assert current["modelId"] == "claude-sonnet-5.5"
    assert record.body["conversationState"]["chatTriggerType"] == "MANUAL"


# -- tools --------------------------------------------------------------------


async def test_tool_use_round_trip_reaches_amazon_q_as_tool_results(gw: Gateway):
    gw.sim.enqueue(
        scripts.tool_reply(
            "get_weather", {"city": "Paris", "unit": "C"}, tool_use_id="tooluse_w1", text_before="Checking."
        )
    )
    first = await gw.client.messages.create(
        model=MODEL, max_tokens=200, tools=[WEATHER_TOOL], messages=[user("Weather in Paris?")]
    )

    assert first.stop_reason == "tool_use"
    assert [block.type for block in first.content] == ["text", "tool_use"]
    call = first.content[1]
    assert call.name == "get_weather"
    assert call.input == {"city": "Paris", "unit": "C"}
    assert tool_names_sent_upstream(gw.upstream_body()) == ["get_weather"]

    gw.sim.enqueue(scripts.text_reply("It is 18 C and sunny in Paris."))
    second = await gw.client.messages.create(
        model=MODEL,
        max_tokens=200,
        tools=[WEATHER_TOOL],
        messages=[
            user("Weather in Paris?"),
            {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "18 C, sunny"}]},
        ],
    )
    assert second.content[0].text == "It is 18 C and sunny in Paris."
    assert second.stop_reason == "end_turn"

    body = gw.upstream_body()
    (result,) = current_user_message(body)["userInputMessageContext"]["toolResults"]
    assert result["toolUseId"] == call.id
    assert result["content"] == [{"text": "18 C, sunny"}]
    assert result["status"] == "success"
    (history_use,) = assistant_tool_uses(body)
    assert history_use == {"toolUseId": call.id, "name": "get_weather", "input": {"city": "Paris", "unit": "C"}}


async def test_a_tool_name_amazon_q_refuses_round_trips_to_the_original(gw: Gateway):
    odd_tool = {**WEATHER_TOOL, "name": ODD_TOOL_NAME, "description": "Look a customer up."}

    def call_the_tool_by_its_q_name(record) -> StreamReply:
        (q_name,) = tool_names_sent_upstream(record.body)
        return scripts.tool_reply(q_name, {"email": "ada@example.com"}, tool_use_id="tooluse_odd1")

    gw.sim.responder = call_the_tool_by_its_q_name
    async with gw.client.messages.stream(
        model=MODEL, max_tokens=200, tools=[odd_tool], messages=[user("Find ada@example.com")]
    ) as stream:
        first = await stream.get_final_message()

    (q_name,) = tool_names_sent_upstream(gw.upstream_body())
    assert Q_IDENTIFIER.match(q_name) and q_name != ODD_TOOL_NAME
    (call,) = first.content
    assert call.type == "tool_use" and call.name == ODD_TOOL_NAME
    assert call.input == {"email": "ada@example.com"}
    assert first.stop_reason == "tool_use"

    # The next turn: the history's tool use goes upstream under the same Q name as the tool spec.
    gw.sim.responder = None
    gw.sim.enqueue(scripts.text_reply("Found her."))
    second = await gw.client.messages.create(
        model=MODEL,
        max_tokens=200,
        tools=[odd_tool],
        messages=[
            user("Find ada@example.com"),
            {"role": "assistant", "content": [call.model_dump(exclude_none=True)]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "Ada, London"}]},
        ],
    )
    assert second.content[0].text == "Found her."
    body = gw.upstream_body()
    assert tool_names_sent_upstream(body) == [q_name]
    assert [use["name"] for use in assistant_tool_uses(body)] == [q_name]
    (result,) = current_user_message(body)["userInputMessageContext"]["toolResults"]
    assert result["toolUseId"] == assistant_tool_uses(body)[0]["toolUseId"]
    assert result["content"] == [{"text": "Ada, London"}]


# -- count_tokens and models ---------------------------------------------------


async def test_count_tokens_is_positive_and_grows_with_content(gw: Gateway):
    async def count(**request: Any) -> int:
        return (await gw.client.messages.count_tokens(model=MODEL, **request)).input_tokens

    short = await count(messages=[user("hi")])
    long = await count(messages=[user("hi there, " * 400)])
    with_tool = await count(messages=[user("hi there, " * 400)], tools=[WEATHER_TOOL])

    assert isinstance(short, int) and short > 0
    assert short < long < with_tool
    assert gw.sim.requests == []  # counted locally, never sent to Amazon Q


async def test_models_list_is_the_anthropic_list_and_pages(gw: Gateway):
    page = await gw.client.models.list()
    ids = [model.id for model in page.data]

    assert MODEL in ids and len(ids) == len(set(ids))
    assert all(model.type == "model" and model.display_name for model in page.data)
    # Paging by two through the SDK's auto-pagination walks the same list.
    assert [model.id async for model in gw.client.models.list(limit=2)] == ids


# -- beta requests and headers ------------------------------------------------


async def test_beta_messages_with_beta_query_and_headers(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("beta works"))
    message = await gw.client.beta.messages.create(
        model=MODEL,
        max_tokens=100,
        messages=[user("beta?")],
        betas=[
            "interleaved-thinking-2025-05-14",
            "context-management-2025-06-27",
            "fine-grained-tool-streaming-2025-05-14",
        ],
        extra_query={"beta": "true"},
    )
    assert message.content[0].text == "beta works"

    gw.sim.enqueue(scripts.text_reply("raw beta works"))
    async with gw.http() as http:
        response = await http.post(
            "/v1/messages?beta=true",
            headers={"anthropic-version": "2023-06-01", "anthropic-beta": "claude-code-20250219,oauth-2025-04-20"},
            json={"model": MODEL, "max_tokens": 100, "messages": [user("raw beta?")]},
        )
    assert response.status_code == 200, response.text
    assert response.json()["content"] == [{"type": "text", "text": "raw beta works"}]
    assert len(gw.sim.requests) == 2


@pytest.mark.parametrize("style", ["tags", "reasoning"])
async def test_thinking_reply_gives_a_signed_thinking_block_then_text(gw: Gateway, style: str):
    # "tags": <thinking> inside reply text; "reasoning": reasoningContentEvent frames.
    gw.sim.enqueue(scripts.thinking_reply("Two plus two is four.", "4", style=style, chunks=3))
    message = await gw.client.messages.create(
        model=MODEL,
        max_tokens=4000,
        thinking={"type": "enabled", "budget_tokens": 2000},
        messages=[user("2+2?")],
    )
    assert [block.type for block in message.content] == ["thinking", "text"]
    assert message.content[0].thinking == "Two plus two is four."
    assert message.content[0].signature  # clients send thinking back with its signature
    assert message.content[1].text == "4"


# -- logs -----------------------------------------------------------------------


async def test_one_log_line_per_request_and_no_secret_anywhere(gw: Gateway):
    request_ids: list[tuple[str, int]] = []
    with capture_logs() as logs:
        gw.sim.enqueue(scripts.text_reply("one"))
        message = await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[user("first")])
        request_ids.append((message._request_id, 200))

        gw.sim.enqueue(scripts.text_reply("two", chunks=2))
        async with gw.client.messages.stream(model=MODEL, max_tokens=50, messages=[user("second")]) as stream:
            await stream.get_final_message()
        request_ids.append((stream.request_id, 200))

        gw.sim.enqueue(scripts.improperly_formed())
        with pytest.raises(anthropic.BadRequestError) as refused:
            await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[user("third")])
        request_ids.append((refused.value.request_id, 400))

        with pytest.raises(anthropic.BadRequestError) as invalid:
            await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[])
        request_ids.append((invalid.value.request_id, 400))

        # Amazon Q rejects the access token: the gateway refreshes and retries.
        gw.sim.check_tokens = True
        gw.sim.revoke_access_tokens()
        gw.sim.enqueue(scripts.text_reply("after a refresh"))
        message = await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[user("fifth")])
        assert message.content[0].text == "after a refresh"
        request_ids.append((message._request_id, 200))

        # ... and then the refresh token is refused too.
        gw.sim.revoke_access_tokens()
        gw.sim.refresh_failure = "invalid_grant"
        with pytest.raises(anthropic.APIStatusError) as dead:
            await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[user("sixth")])
        request_ids.append((dead.value.request_id, dead.value.status_code))

    lines = logs.request_lines()
    assert [(line.extra.get("request_id"), line.extra.get("status")) for line in lines] == request_ids
    assert all(line.level == "INFO" and line.extra["model"] == MODEL for line in lines[:3])
    assert lines[1].extra["stream"] is True and lines[0].extra["stream"] is False
    assert lines[0].extra["output_tokens"] > 0 and lines[0].extra["stop_reason"] == "end_turn"
    assert lines[0].extra["upstream_attempts"] == 1
    assert gw.sim.refresh_calls >= 3  # there were secrets to leak
    # The client key, the client secret, and every refresh and access token ever issued (revoked ones too).
    assert find_secrets(logs.text) == []


async def test_debug_message_conversion_logs_the_summary(tmp_path):
    async with open_gateway(tmp_path, DEBUG_MESSAGE_CONVERSION="true") as gw:
        gw.sim.enqueue(scripts.text_reply("ok"))
        with capture_logs() as logs:
            await gw.client.messages.create(
                model=MODEL,
                max_tokens=50,
                messages=[user("first question"), {"role": "assistant", "content": "first answer"}, user("second")],
            )
    assert "=== Message Conversion Debug ===" in logs.text
    assert "Input: 3 Claude messages" in logs.text
    assert "Output: 2 history messages + 1 current message" in logs.text
    assert "  History[0]: USER (toolResults: False)\n  History[1]: ASSISTANT (toolUses: False)" in logs.text
    assert CLIENT_KEY not in logs.text


async def test_debug_level_logs_redacted_reproducers_without_image_bytes(tmp_path):
    image = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8).decode()
    async with open_gateway(tmp_path, DEBUG_MESSAGE_CONVERSION="true") as gw:
        gw.sim.enqueue(scripts.text_reply("ok"))
        with capture_logs() as logs:
            await gw.client.messages.create(
                model=MODEL,
                max_tokens=50,
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image}},
                            {"type": "text", "text": "what is in this picture?"},
                        ],
                    }
                ],
            )
    dumps = {
        line.message.split(":", 1)[0]: line.message
        for line in logs.lines
        if line.level == "DEBUG" and "(redacted)" in line.message
    }
    assert set(dumps) == {"Claude request (redacted)", "Amazon Q request (redacted)"}
    for dump in dumps.values():
        assert "what is in this picture?" in dump  # the text a reproducer needs is kept
        assert f"<{len(image)} base64 characters>" in dump
        assert image[:40] not in dump
    assert CLIENT_KEY not in logs.text


async def test_a_large_body_is_parsed_and_converted_off_the_event_loop(gw: Gateway, monkeypatch):
    # A 30 MiB body parsed on the event loop stalls every other stream for half a second; above
    # OFF_LOOP_BODY_BYTES the reading and the conversion run in a worker thread, below it they stay.
    from q2api.server.lifecycle import relay

    on_event_loop: list[bool] = []
    prepare = relay.MessagesRelay.prepare

    def recording_prepare(self, call, exchange, *rest):
        try:
            asyncio.get_running_loop()
            on_event_loop.append(True)
        except RuntimeError:  # a worker thread runs no loop
            on_event_loop.append(False)
        return prepare(self, call, exchange, *rest)

    monkeypatch.setattr(relay.MessagesRelay, "prepare", recording_prepare)
    chunk = "x" * 400_000  # under the per-message limit; three of them make the body large
    large = [user(chunk), {"role": "assistant", "content": "ok"}, user(chunk), {"role": "assistant", "content": "ok"}]
    for messages in ([user("small")], [*large, user(chunk)]):
        reply = await gw.client.messages.create(model=MODEL, max_tokens=50, messages=messages)
        assert reply.stop_reason == "end_turn"
    assert on_event_loop == [True, False]


async def test_the_next_turn_of_a_session_resumes_its_conversion_and_sends_the_same_body(
    gw: Gateway, tmp_path, monkeypatch
):
    # Claude Code resends the whole conversation every turn: the gateway converts what it has seen
    # once (q2api.conversion.checkpoints), and what reaches Amazon Q is what a conversion from
    # scratch — by a gateway that has never seen the session — would have sent.
    import orjson

    from q2api.conversion.checkpoints import CheckpointStore
    from tests.support.claude_code_request import claude_code_request

    resumed_after: dict[
        CheckpointStore, list[int | None]
    ] = {}  # each store: how many messages each request resumed after
    find = CheckpointStore.find

    def recording_find(store, conversation_id, messages):
        found = find(store, conversation_id, messages)
        resumed_after.setdefault(store, []).append(None if found is None else len(found.messages))
        return found

    monkeypatch.setattr(CheckpointStore, "find", recording_find)
    first = claude_code_request(size_kb=20)
    tool_use = {"type": "tool_use", "id": "toolu_ls", "name": "Bash", "input": {"command": "ls"}}
    tool_result = {"type": "tool_result", "tool_use_id": "toolu_ls", "content": "a.py"}
    second = {
        **first,
        "messages": [
            *first["messages"],
            {"role": "assistant", "content": [tool_use]},
            {"role": "user", "content": [tool_result]},
        ],
    }

    async def send(gateway: Gateway, body: dict[str, Any]) -> dict[str, Any]:
        gateway.sim.enqueue(scripts.text_reply("ok"))
        async with gateway.http() as http:
            response = await http.post("/v1/messages", content=orjson.dumps(body))
        assert response.status_code == 200, response.text
        return gateway.sim.requests[-1].body

    upstream_bodies = [await send(gw, first), await send(gw, second)]
    async with open_gateway(tmp_path / "fresh") as fresh:
        upstream_bodies.append(await send(fresh, second))
    (session, session_finds), (_, fresh_finds) = resumed_after.items()
    assert session_finds == [None, len(first["messages"])] and fresh_finds == [None]
    assert len(session) == 1  # the second turn's checkpoint took the place of the first's
    assert upstream_bodies[1] == upstream_bodies[2]
