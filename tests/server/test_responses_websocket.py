"""The Responses API over a WebSocket (`GET /v1/responses` upgraded), driven by the openai SDK's own
WebSocket client (`client.beta.responses.connect()`) and, for what the SDK hides, a raw socket.

Each turn is checked on what the client gets (the SSE stream's events, one per message; errors
as OpenAI's WebSocket error messages) and on what reached the simulated Amazon Q: the
conversation a `previous_response_id` continues (the connection's last response, stored or not;
a stored one from anywhere), a prepared turn that calls nothing, the client key and its limits
checked at the handshake and on every turn, and a client that closes the socket stopping the
upstream stream. The real Codex over the socket: test_codex_cli.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from q2api.tenants.database import open_tenant_database
from q2api.tenants.keys import KeyLimits, KeyStore
from q2api.testing import scripts
from tests.support.gateway_harness import (
    CLIENT_KEY,
    MODEL,
    CapturedLine,
    CapturedLogs,
    Gateway,
    capture_logs,
    current_user_message,
    open_gateway,
)
from tests.support.openai_harness import openai_client

TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")


def ws_url(gw: Gateway) -> str:
    return gw.base_url.replace("http://", "ws://") + "/v1/responses"


@contextlib.asynccontextmanager
async def raw_socket(gw: Gateway, headers: dict[str, str] | None = None) -> AsyncIterator[ClientConnection]:
    auth = {"authorization": f"Bearer {CLIENT_KEY}"}
    async with connect(ws_url(gw), additional_headers={**auth, **(headers or {})}, open_timeout=10) as socket:
        yield socket


async def turn(socket: Any, **create: Any) -> list[dict[str, Any]]:
    """Send one `response.create` (raw socket or SDK connection); the events up to its terminal one,
    each message read as one JSON object (a message holding two would not parse)."""
    message = {"type": "response.create", "model": MODEL, **create}
    if isinstance(socket, ClientConnection):
        await socket.send(json.dumps(message))
    else:
        await socket.send(message)
    events = []
    while True:
        raw = await asyncio.wait_for(socket.recv() if isinstance(socket, ClientConnection) else socket.recv_bytes(), 10)
        event = json.loads(raw)
        events.append(event)
        if event["type"] in TERMINAL:
            return events


def turn_lines(logs: CapturedLogs) -> list[CapturedLine]:
    return [line for line in logs.lines if line.message.startswith("POST /v1/responses")]


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def history_text(gw: Gateway, index: int = -1) -> str:
    return json.dumps(gw.upstream_body(index)["conversationState"]["history"])


# ---------------------------------------------------------------- turns


async def test_a_turn_over_the_socket_is_the_sse_stream_one_event_per_message(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("Over HTTP first.", chunks=3))
    async with openai_client(gw) as client, client.responses.stream(model=MODEL, input="hi") as stream:
        over_http = [event.type async for event in stream]

    gw.sim.enqueue(scripts.text_reply("Then over the socket.", chunks=3))
    with capture_logs() as logs:
        async with openai_client(gw) as client, client.beta.responses.connect() as connection:
            events = await turn(connection, input="hi")
        assert await gw.sim.wait_until(lambda: bool(turn_lines(logs)), timeout=5)

    assert kinds(events) == over_http  # the same events, in the same order
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    completed = events[-1]["response"]
    assert (
        completed["status"] == "completed" and completed["output"][0]["content"][0]["text"] == "Then over the socket."
    )
    assert current_user_message(gw.upstream_body())["content"].endswith("hi")
    (line,) = turn_lines(logs)
    assert line.message == "POST /v1/responses" and line.extra["status"] == 200 and line.extra["stream"]
    assert line.extra["transport"] == "websocket"


async def test_turns_continue_the_connection_s_last_response_even_unstored(gw: Gateway):
    """Codex's way: `store: false`, then only the new items with the last response's id."""
    gw.sim.enqueue(scripts.tool_reply("shell", {"cmd": "ls"}, tool_use_id="call_ls", text_before="Listing."))
    gw.sim.enqueue(scripts.text_reply("Two files."))
    shell = {"type": "function", "name": "shell", "parameters": {"type": "object"}}
    async with openai_client(gw) as client, client.beta.responses.connect() as connection:
        first = (await turn(connection, input="list the files", store=False, tools=[shell]))[-1]["response"]
        output = {"type": "function_call_output", "call_id": "call_ls", "output": "a.txt\nb.txt"}
        second = (await turn(connection, input=[output], store=False, tools=[shell], previous_response_id=first["id"]))[
            -1
        ]["response"]
        assert second["status"] == "completed" and second["previous_response_id"] == first["id"]
        with pytest.raises(openai.NotFoundError):  # kept by the connection only: never stored
            await client.responses.retrieve(first["id"])

    history = history_text(gw)
    assert "list the files" in history and "Listing." in history and "call_ls" in history
    (result,) = current_user_message(gw.upstream_body())["userInputMessageContext"]["toolResults"]
    assert result["toolUseId"] == "call_ls" and result["content"][0]["text"] == "a.txt\nb.txt"


async def test_stored_responses_continue_across_the_socket_and_http(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("Stored over HTTP."))
    gw.sim.enqueue(scripts.text_reply("Continued over the socket."))
    gw.sim.enqueue(scripts.text_reply("Continued over HTTP."))
    async with openai_client(gw) as client:
        over_http = await client.responses.create(model=MODEL, input="first")
        async with client.beta.responses.connect() as connection:
            events = await turn(connection, input="second", previous_response_id=over_http.id)
        over_socket = events[-1]["response"]
        assert over_socket["store"] is True
        stored = await client.responses.retrieve(over_socket["id"])
        assert stored.output_text == "Continued over the socket."
        third = await client.responses.create(model=MODEL, input="third", previous_response_id=over_socket["id"])
        assert third.output_text == "Continued over HTTP."
    history = history_text(gw)
    for text in ("first", "Stored over HTTP.", "second", "Continued over the socket."):
        assert text in history


async def test_generate_false_prepares_a_turn_without_calling_amazon_q(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("Ready."))
    async with openai_client(gw) as client, client.beta.responses.connect() as connection:
        prepared = await turn(
            connection,
            input=[{"role": "developer", "content": "Answer in one word."}],
            store=False,
            generate=False,
        )
        assert kinds(prepared) == ["response.created", "response.in_progress", "response.completed"]
        warmed = prepared[-1]["response"]
        assert warmed["status"] == "completed" and warmed["output"] == []
        assert gw.sim.requests == []  # nothing reached Amazon Q
        answered = await turn(connection, input="go", store=False, previous_response_id=warmed["id"])
    assert answered[-1]["response"]["status"] == "completed"
    (request,) = gw.sim.requests
    assert "Answer in one word." in json.dumps(request.body["conversationState"])


async def test_messages_are_answered_one_at_a_time_in_order(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("one", delay=0.05))
    gw.sim.enqueue(scripts.text_reply("two"))
    async with raw_socket(gw) as socket:
        for text in ("first", "second"):
            await socket.send(json.dumps({"type": "response.create", "model": MODEL, "input": text, "stream_id": text}))
        events = []
        while sum(event["type"] == "response.completed" for event in events) < 2:
            events.append(json.loads(await asyncio.wait_for(socket.recv(), 10)))
    lanes = [event["stream_id"] for event in events]
    assert lanes == sorted(lanes, key=("first", "second").index)  # every event of the first, then the second
    assert {lane: lanes.count(lane) > 2 for lane in lanes} == {"first": True, "second": True}


# ---------------------------------------------------------------- errors


async def test_errors_are_error_messages_and_the_connection_stays_open(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("Still here."))
    async with raw_socket(gw) as socket:
        await socket.send("not json")
        not_json = json.loads(await socket.recv())
        (bad_field,) = await turn(socket, input="hi", temperature=7)
        (unknown_type,) = [json.loads(raw) async for raw in _one(socket, {"type": "response.steer", "input": "x"})]
        (gap,) = await turn(socket, input="hi", previous_response_id="resp_nowhere")
        answered = await turn(socket, input="hi")

    assert not_json["type"] == "error" and not_json["status"] == 400
    assert not_json["error"]["type"] == "invalid_request_error" and "not valid JSON" in not_json["error"]["message"]
    assert bad_field["status"] == 400 and bad_field["error"]["param"] == "temperature"
    assert unknown_type["status"] == 400 and unknown_type["error"]["param"] == "type"
    assert "response.steer" in unknown_type["error"]["message"]
    assert gap["status"] == 404 and gap["error"]["code"] == "previous_response_not_found"
    assert gap["error"]["param"] == "previous_response_id"
    assert answered[-1]["response"]["status"] == "completed"


async def _one(socket: ClientConnection, message: dict[str, Any]) -> AsyncIterator[str | bytes]:
    await socket.send(json.dumps(message))
    yield await asyncio.wait_for(socket.recv(), 10)


async def test_an_upstream_refusal_is_an_error_message_with_its_status(gw: Gateway):
    gw.sim.enqueue(scripts.context_overflow())
    async with openai_client(gw) as client, client.beta.responses.connect() as connection:
        (error,) = await turn(connection, input="a very long conversation")
    assert error["type"] == "error" and error["status"] == 400
    assert error["error"]["code"] == "context_length_exceeded"
    assert error["headers"]["x-should-retry"] == "false" and error["headers"]["request-id"].startswith("req_")


# ---------------------------------------------------------------- who may connect


async def test_the_handshake_is_refused_without_a_client_key_in_the_openai_envelope(gw: Gateway):
    with pytest.raises(InvalidStatus) as refused:
        async with connect(ws_url(gw), additional_headers={"authorization": "Bearer wrong"}, open_timeout=10):
            pass
    response = refused.value.response
    assert response.status_code == 401
    body = json.loads(response.body)
    assert body["error"]["type"] == "authentication_error" and "Bearer" in body["error"]["message"]


async def test_a_browser_page_cannot_open_the_socket_of_a_keyless_gateway(tmp_path: Path):
    async with open_gateway(tmp_path, Q2API_API_KEYS="") as gw:
        with pytest.raises(InvalidStatus) as refused:
            async with connect(ws_url(gw), additional_headers={"origin": "https://evil.example"}, open_timeout=10):
                pass
        assert refused.value.response.status_code == 403
        assert "web page" in json.loads(refused.value.response.body)["error"]["message"]
        gw.sim.enqueue(scripts.text_reply("hi"))
        async with connect(ws_url(gw), open_timeout=10) as socket:  # Codex sends no Origin
            assert (await turn(socket, input="hi"))[-1]["response"]["status"] == "completed"


async def test_a_store_key_is_held_to_its_models_and_recorded_on_every_turn(tmp_path: Path):
    database = await open_tenant_database(None, tmp_path)
    try:
        key, _ = await KeyStore(database).create("codex", KeyLimits(models=(MODEL,)))
    finally:
        await database.close()
    with capture_logs() as logs:
        async with open_gateway(tmp_path) as gw:
            gw.sim.enqueue(scripts.text_reply("allowed"))
            async with connect(ws_url(gw), additional_headers={"authorization": f"Bearer {key}"}) as socket:
                allowed = await turn(socket, input="hi")
                (refused,) = await turn(socket, input="hi", model="claude-haiku-4-5")
            assert await gw.sim.wait_until(lambda: len(turn_lines(logs)) == 2, timeout=5)
    assert allowed[-1]["response"]["status"] == "completed"
    assert refused["status"] == 403 and "claude-haiku-4-5" in refused["error"]["message"]
    lines = turn_lines(logs)
    assert [(line.extra["status"], line.extra.get("key")) for line in lines] == [(200, "codex"), (403, "codex")]
    assert len(gw.sim.requests) == 1


# ---------------------------------------------------------------- leaving


async def test_closing_the_socket_stops_the_upstream_stream(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("slow " * 40, chunks=40, delay=0.05))
    with capture_logs() as logs:
        async with raw_socket(gw) as socket:
            await socket.send(json.dumps({"type": "response.create", "model": MODEL, "input": "slowly"}))
            while json.loads(await asyncio.wait_for(socket.recv(), 10))["type"] != "response.output_text.delta":
                pass
        assert await gw.sim.wait_until(lambda: gw.sim.disconnects >= 1, timeout=5)
        assert gw.sim.active_streams == 0 and gw.sim.streams_completed == 0
        assert await gw.sim.wait_until(lambda: bool(turn_lines(logs)), timeout=5)
    (line,) = turn_lines(logs)
    assert line.extra["status"] == 499 and "error=client_disconnected" in line.message


async def test_a_socket_upgraded_on_a_kept_alive_connection_outlives_the_body_timeout(tmp_path: Path):
    """The body timer an upgrade request's headers start belongs to HTTP: it must not close the socket."""
    async with open_gateway(tmp_path, Q2API_BODY_TIMEOUT="0.3") as gw:
        host, port = gw.base_url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        # One plain request first, so that the upgrade comes on a connection that already served one.
        writer.write(f"GET /healthz HTTP/1.1\r\nhost: {host}:{port}\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(
            next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")).split(b":")[1]
        )
        await reader.readexactly(length)
        sock = writer.get_extra_info("socket").dup()
        writer.transport.pause_reading()
        gw.sim.enqueue(scripts.text_reply("still open"))
        async with connect(
            ws_url(gw), sock=sock, additional_headers={"authorization": f"Bearer {CLIENT_KEY}"}, open_timeout=10
        ) as socket:
            await asyncio.sleep(0.8)  # well past the body timeout
            events = await turn(socket, input="hi")
        writer.close()
    assert events[-1]["response"]["status"] == "completed"


async def test_a_client_that_floods_the_socket_is_told_and_nothing_is_lost(gw: Gateway):
    """A turn runs while 8 messages wait; one more is refused (429) on its own, and every waiting one is answered."""
    gw.sim.enqueue(scripts.text_reply("first", delay=0.2, chunks=3))
    for number in range(8):
        gw.sim.enqueue(scripts.text_reply(f"answer {number}"))
    async with raw_socket(gw) as socket:
        await socket.send(json.dumps({"type": "response.create", "model": MODEL, "input": "turn 0"}))
        events = [json.loads(await asyncio.wait_for(socket.recv(), 10))]
        assert events[0]["type"] == "response.created"  # the first turn runs: the queue is empty
        for number in range(1, 10):
            await socket.send(json.dumps({"type": "response.create", "model": MODEL, "input": f"turn {number}"}))
        while sum(event["type"] in ("response.completed", "error") for event in events) < 10:
            events.append(json.loads(await asyncio.wait_for(socket.recv(), 10)))
    (refused,) = [event for event in events if event["type"] == "error"]
    assert refused["status"] == 429 and refused["error"]["code"] == "rate_limit_exceeded"
    assert sum(event["type"] == "response.completed" for event in events) == 9
    assert len(gw.sim.requests) == 9
