"""Every door, fuzzed: a few hundred hostile bodies each against a real gateway — never a 5xx, always
the door's envelope, no traceback or ERROR in the log; and the failures the fuzzers found, one test each.

The bodies come from one seeded fuzzer per door (tests/support/door_bodies.py): `/v1/messages`,
`/v1/chat/completions`, `/v1/responses`, `/admin/api/...`. `bench/fuzz_doors.py` runs the same
fuzzers on 100,000 bodies per door against `q2api serve` in a process of its own; a failure there
prints `door:seed:index`, which `bench/fuzz_doors.py --replay` turns back into the body. Set
Q2API_TEST_FUZZ_SEED to fuzz other bodies than CI's.

The gateway runs on a loopback port in this process (q2api.testing.gateway_server): the admin
API's device logins and the OpenAI doors' streams are served as they are in production, and one
module-wide gateway keeps the CPU for the bodies (about 1,000 of them, ~10 s).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import httpx2
import pytest

from q2api.testing.gateway_server import GatewayThread
from q2api.testing.simulated_upstream import SimulatedUpstream
from q2api.testing.simulation_thread import SimulationThread
from tests.support.door_bodies import DOOR_FUZZERS
from tests.support.gateway_harness import ADMIN_KEY, CLIENT_KEY, MODEL, capture_logs, gateway_settings

BODIES_PER_DOOR = 250
SEED = int(os.environ.get("Q2API_TEST_FUZZ_SEED", "30"))


class Doors:
    def __init__(self, http: httpx2.Client, sim: SimulationThread) -> None:
        self.http = http
        self.sim = sim

    def post(self, path: str, body: bytes, method: str = "POST") -> httpx2.Response:
        key = ADMIN_KEY if path.startswith("/admin/") else CLIENT_KEY
        headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
        return self.http.request(method, path, content=body or None, headers=headers)

    @property
    def upstream_calls(self) -> int:
        return len(self.sim.sim.requests)


@pytest.fixture(scope="module")
def doors(tmp_path_factory) -> Iterator[Doors]:
    with SimulatedUpstream.run_in_thread() as upstream:
        data_dir = tmp_path_factory.mktemp("door-fuzz")
        settings = gateway_settings(upstream, data_dir, Q2API_STREAM_HOLD_SECONDS="0", Q2API_ADMIN_KEY=ADMIN_KEY)
        with GatewayThread(settings) as gateway, httpx2.Client(base_url=gateway.base_url, timeout=60) as http:
            yield Doors(http, upstream)


def faults(logs) -> list[str]:
    return [line.message for line in logs.lines if line.level in ("ERROR", "CRITICAL")] + (
        ["Traceback"] if "Traceback" in logs.text else []
    )


@pytest.mark.parametrize("door", sorted(DOOR_FUZZERS))
def test_no_fuzzed_body_is_a_5xx_or_a_traceback(doors: Doors, door: str) -> None:
    fuzzer = DOOR_FUZZERS[door]
    statuses: dict[int, int] = {}
    for index in range(BODIES_PER_DOOR):
        request = fuzzer.request(SEED, index)
        with capture_logs() as logs:
            response = doors.post(request.path, request.body, request.method)
        replay = f"bench/fuzz_doors.py --replay {door}:{SEED}:{index}"
        assert fuzzer.problem(response.status_code, response.content) is None, (replay, response.content[:500])
        assert not faults(logs), (replay, logs.text[-3000:])
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
    # The fuzzer reaches past the parsers: some bodies are served.
    assert sum(count for status, count in statuses.items() if status < 300), statuses


# ---------------------------------------------------------------- what the fuzzers found, one test each

BIG = 2**64
DEEP_ARGUMENTS = '{"a":' * 1000 + "1" + "}" * 1000  # a JSON text 1,000 levels deep, as a string


def claude(**fields: object) -> dict:
    return {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}], **fields}


FOUND = [
    pytest.param(
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": DEEP_ARGUMENTS}}
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
            ],
        },
        "messages[1].tool_calls[0].function.arguments",
        id="chat-arguments-1000-deep",
    ),
    pytest.param(
        "/v1/responses",
        {
            "model": MODEL,
            "input": [
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": DEEP_ARGUMENTS},
                {"type": "function_call_output", "call_id": "c", "output": "x"},
            ],
        },
        "input[0].arguments",
        id="responses-arguments-1000-deep",
    ),
    pytest.param(
        "/v1/messages",
        claude(tools=[{"name": "f", "input_schema": {"type": "object", "properties": {"a": {"maximum": BIG}}}}]),
        "tools.0.input_schema.properties.a.maximum",
        id="messages-schema-2**64",
    ),
    pytest.param(
        "/v1/messages",
        claude(
            messages=[
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": BIG}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
            ]
        ),
        "messages.1.content.0.input.a",
        id="messages-tool-use-input-2**64",
    ),
    pytest.param("/v1/messages", claude(max_tokens=BIG), "max_tokens", id="messages-max-tokens-2**64"),
    pytest.param(
        "/v1/messages/count_tokens",
        {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "metadata": {"n": -(2**63) - 1}},
        "metadata.n",
        id="count-tokens-below-the-range",
    ),
    pytest.param(
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [
                {"type": "function", "function": {"name": "f", "parameters": {"properties": {"a": {"maximum": BIG}}}}}
            ],
        },
        "tools[0].function.parameters.properties.a.maximum",
        id="chat-schema-2**64",
    ),
    pytest.param(
        "/v1/chat/completions",
        {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": BIG},
        "max_tokens",
        id="chat-max-tokens-2**64",
    ),
    pytest.param(
        "/v1/responses",
        {"model": MODEL, "input": "hi", "max_output_tokens": BIG},
        "max_output_tokens",
        id="responses-max-output-tokens-2**64",
    ),
    pytest.param(
        "/v1/responses",
        {
            "model": MODEL,
            "input": "hi",
            "tools": [
                {
                    "type": "function",
                    "name": "f",
                    "parameters": {"type": "object", "properties": {"a": {"enum": [BIG]}}},
                }
            ],
        },
        "tools[0].parameters.properties.a.enum[0]",
        id="responses-schema-2**64",
    ),
    pytest.param(
        "/v1/messages",
        claude(
            output_config={"format": {"type": "json_schema", "schema": json.loads('{"a":' * 600 + "1" + "}" * 600)}}
        ),
        "output_config.format.schema",
        id="messages-format-schema-600-deep",
    ),
    pytest.param(
        "/v1/messages",
        claude(
            messages=[
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [{"type": "web_search_tool_result", "tool_use_id": "s", "content": 173}],
                },
            ]
        ),
        "messages.1.content.0",
        id="messages-web-search-result-content-a-number",
    ),
]


@pytest.mark.parametrize(("path", "document", "field"), FOUND)
def test_what_the_fuzzers_found_is_a_400_naming_the_field_before_any_upstream_call(
    doors: Doors, path: str, document: dict, field: str
) -> None:
    calls = doors.upstream_calls
    with capture_logs() as logs:
        response = doors.post(path, json.dumps(document).encode())
    assert response.status_code == 400, response.text[:500]
    error = response.json()["error"]
    assert field in error["message"], error
    if path.startswith(("/v1/chat", "/v1/responses")):
        assert error["type"] == "invalid_request_error" and set(error) == {"message", "type", "param", "code"}
    else:
        assert response.json()["type"] == "error" and error["type"] == "invalid_request_error"
    assert doors.upstream_calls == calls  # refused at the door: no credits spent
    assert not faults(logs), logs.text[-3000:]


@pytest.mark.parametrize("api_key", ["a\r\nb", "key\x00", "ключ"])
def test_an_account_api_key_that_cannot_travel_in_a_header_is_a_400(doors: Doors, api_key: str) -> None:
    with capture_logs() as logs:
        response = doors.post("/admin/api/accounts", json.dumps({"label": "fuzzed", "api_key": api_key}).encode())
    assert response.status_code == 400, response.text
    assert "api_key" in response.json()["error"]["message"]
    assert not faults(logs), logs.text[-3000:]


@pytest.mark.parametrize("field", ["rpm", "max_concurrent", "credits_per_day"])
def test_a_key_limit_past_a_floats_range_is_a_400(doors: Doors, field: str) -> None:
    with capture_logs() as logs:
        response = doors.post("/admin/api/keys", json.dumps({"label": "fuzzed", field: 10**400}).encode())
    assert response.status_code == 400, response.text
    assert field in response.json()["error"]["message"]
    assert not faults(logs), logs.text[-3000:]


def test_an_integer_out_of_range_is_found_beside_invalid_utf8_the_parser_skipped(doors: Doors) -> None:
    # The typed parser skips an unknown key of a nested object unread, invalid UTF-8 and all: the
    # plain parse that finds the integer's field must get past it too (a 500 after the upstream call).
    body = b'{"model": "%s", "input": "hi", "max_output_tokens": 18446744073709551616, "text": {"\xed\xa0\x80x": 1}}'
    calls = doors.upstream_calls
    with capture_logs() as logs:
        response = doors.post("/v1/responses", body % MODEL.encode())
    assert response.status_code == 400, response.text[:500]
    assert response.json()["error"]["param"] == "max_output_tokens"
    assert doors.upstream_calls == calls
    assert not faults(logs), logs.text[-3000:]
