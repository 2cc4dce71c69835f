"""A `response_format` schema cannot make the gateway fetch a URL, read a file, hang or backtrack;
a reply that fails it is answered once, never retried by the SDK (issue 26, items 1, 2 and 11).

Each test goes through the real gateway with the official `openai` SDK. A reference the gateway
must not follow points at something that would tell if it were followed: a loopback HTTP server
counting its connections, a real file watched by an audit hook, a server that accepts and never
answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from q2api.frontdoors import client_schema
from q2api.testing import scripts
from tests.support.gateway_harness import CLIENT_KEY, MODEL, Gateway, capture_logs, open_gateway
from tests.support.openai_harness import assert_openai_envelope, openai_client, user

SCHEMA_PARAM = "response_format.json_schema.schema"
CATASTROPHIC = "^(a+)+$"


def json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


class CountingListener:
    """A loopback server that counts the connections it accepts and answers each with a JSON schema."""

    def __init__(self) -> None:
        self.connections = 0
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self.connections += 1
            with connection:
                connection.recv(65536)
                body = b'{"type": "string"}'
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(body), body)
                )

    def close(self) -> None:
        self._socket.close()


@pytest.fixture
def listener() -> Iterator[CountingListener]:
    server = CountingListener()
    yield server
    server.close()


# Files opened by this process while a test watches them (an audit hook cannot be removed: it stays, idle).
_watched: dict[str, list[str]] = {}


def _on_audit_event(event: str, arguments: tuple[Any, ...]) -> None:
    if event == "open" and arguments and isinstance(arguments[0], (str, Path)):
        opened = str(arguments[0])
        if opened in _watched:
            _watched[opened].append(event)


sys.addaudithook(_on_audit_event)


@contextlib.contextmanager
def watched_file(path: Path) -> Iterator[list[str]]:
    """Every open() of `path` in this process (the gateway runs in it) while the block runs."""
    opens: list[str] = []
    _watched[str(path)] = opens
    try:
        yield opens
    finally:
        del _watched[str(path)]


async def refused_schema(gw: Gateway, schema: dict[str, Any]) -> dict[str, Any]:
    """The 400 a request with `schema` gets; nothing may have gone upstream."""
    gw.sim.enqueue(scripts.text_reply('{"a": 1}'))  # what the model would answer, were the request sent
    async with openai_client(gw) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model=MODEL, messages=[user("answer")], response_format=json_schema(schema)
            )
    assert gw.sim.requests == []
    error = assert_openai_envelope(caught.value.body)
    assert error["param"] == SCHEMA_PARAM and error["message"].startswith(SCHEMA_PARAM)
    return error


# -- item 1: no retrieval ------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_a_reference_to_a_url_is_a_400_and_nothing_connects_to_it(gw: Gateway, listener, scheme) -> None:
    url = listener.url.replace("http", scheme, 1) + "/schema.json"
    error = await refused_schema(gw, {"type": "object", "properties": {"a": {"$ref": url}}})
    assert "points outside the schema" in error["message"] and url in error["message"]
    assert listener.connections == 0


async def test_a_reference_to_a_file_is_a_400_and_the_file_is_never_opened(gw: Gateway, tmp_path) -> None:
    secret_schema = tmp_path / "secret-schema.json"
    secret_schema.write_text('{"type": "string", "description": "read by the gateway"}')
    with watched_file(secret_schema) as opens:
        error = await refused_schema(gw, {"type": "object", "properties": {"a": {"$ref": secret_schema.as_uri()}}})
    assert "points outside the schema" in error["message"]
    assert opens == []


async def test_a_reference_to_a_server_that_never_answers_is_a_400_at_once(gw: Gateway) -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # connections queue up; none is ever accepted or answered
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/schema.json"
        error = await refused_schema(gw, {"properties": {"a": {"$ref": url}}})
        assert "points outside the schema" in error["message"]
        silent.setblocking(False)
        with pytest.raises(BlockingIOError):
            silent.accept()  # nobody even connected
    finally:
        silent.close()


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ({"$ref": "#"}, "applies itself to the same value without end"),
        ({"properties": {"a": {"$ref": "#/$defs/missing"}}}, "resolves to nothing in the schema"),
        ({"properties": {"a": {"$ref": "relative.json"}}}, "points outside the schema"),
    ],
    ids=["cycle", "unresolvable", "relative"],
)
async def test_references_that_cannot_be_followed_safely_are_400s(gw: Gateway, schema, said) -> None:
    with capture_logs() as logs:
        error = await refused_schema(gw, schema)
    assert said in error["message"]
    assert "Traceback" not in logs.text


# -- item 2: no backtracking, a bounded check ----------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_catastrophic_pattern_gets_its_answer_at_once(gw: Gateway, stream: bool) -> None:
    not_quite = "a" * 40 + "!"  # Python's re: 2^40 steps, the worker frozen for days
    schema = {"type": "object", "properties": {"word": {"type": "string", "pattern": CATASTROPHIC}}}
    gw.sim.enqueue(*[scripts.text_reply(f'{{"word": "{not_quite}"}}')] * 2)  # the reply and its repair turn
    async with openai_client(gw) as client:
        with pytest.raises(openai.APIError) as caught:
            request = {"model": MODEL, "messages": [user("a word")], "response_format": json_schema(schema)}
            if stream:
                async for _ in await client.chat.completions.create(stream=True, **request):
                    pass
            else:
                await client.chat.completions.create(**request)
    body = assert_openai_envelope(caught.value.body)
    assert body["code"] == "invalid_response_format"
    assert f"at word: '{not_quite}' does not match '{CATASTROPHIC}'" in body["message"]


async def test_a_pattern_re2_cannot_run_is_a_400_naming_the_field(gw: Gateway) -> None:
    error = await refused_schema(gw, {"properties": {"a": {"type": "string", "pattern": "(?<=x)y"}}})
    assert "the pattern '(?<=x)y' is not supported" in error["message"]


@pytest.mark.slow  # waits out a ten-second schema check
async def test_other_clients_are_served_while_a_costly_schema_is_checked(tmp_path, monkeypatch) -> None:
    # Room for the other request, however loaded the machine: the check runs twice (the held reply, then
    # the door's own judgement of it), each stopped by its deadline; a check that could not decide asks
    # for no repair turn, which could not be decided either.
    monkeypatch.setattr(client_schema, "CHECK_SECONDS", 4.0)
    levels = 40  # 2^40 evaluations: only the deadline ends the check
    definitions: dict[str, Any] = {
        f"d{level}": {"anyOf": [{"$ref": f"#/$defs/d{level + 1}"}, {"$ref": f"#/$defs/d{level + 1}"}]}
        for level in range(levels)
    }
    definitions[f"d{levels}"] = {"type": "string"}
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": definitions}
    async with open_gateway(tmp_path) as gw, openai_client(gw) as client:
        # The replies in the order the calls come: the costly one, the other client's.
        gw.sim.enqueue(scripts.text_reply('{"a": 5}'), scripts.text_reply("meanwhile"))
        costly = asyncio.create_task(
            client.chat.completions.create(model=MODEL, messages=[user("a")], response_format=json_schema(schema))
        )
        await asyncio.sleep(1.0)  # the reply is in, and its check has begun (it takes 4 s)
        assert len(gw.sim.requests) == 1
        other = await client.chat.completions.create(model=MODEL, messages=[user("b")])
        assert other.choices[0].message.content == "meanwhile" and not costly.done()
        with pytest.raises(openai.UnprocessableEntityError) as caught:
            await costly
        assert len(gw.sim.requests) == 2  # no repair turn
    assert "could not be checked against the JSON schema within 4 s" in caught.value.body["message"]


# -- item 11: a failed check is answered once ---------------------------------------------------


async def test_a_reply_that_fails_the_format_costs_one_repair_turn_with_the_sdks_own_retries(gw: Gateway) -> None:
    gw.sim.enqueue(*[scripts.text_reply("Sure! Here it is: four.") for _ in range(4)])
    # The SDK's defaults: two retries of anything it deems retryable.
    client = openai.AsyncOpenAI(base_url=f"{gw.base_url}/v1", api_key=CLIENT_KEY, timeout=20)
    async with client:
        with pytest.raises(openai.UnprocessableEntityError) as caught:
            await client.chat.completions.create(
                model=MODEL, messages=[user("n?")], response_format={"type": "json_object"}
            )
    # The reply, then one repair turn that shows the model its reply and what was wrong; no SDK retry.
    assert len(gw.sim.requests) == 2
    repair = gw.upstream_body(1)["conversationState"]
    assert repair["history"][-1]["assistantResponseMessage"]["content"] == "Sure! Here it is: four."
    assert "not valid JSON" in repair["currentMessage"]["userInputMessage"]["content"]
    assert caught.value.status_code == 422
    assert caught.value.response.headers["x-should-retry"] == "false"
    error = assert_openai_envelope(caught.value.body)
    assert (error["code"], error["param"]) == ("invalid_response_format", "response_format")
