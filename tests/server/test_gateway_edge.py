"""The HTTP edge of the real gateway: body limits, bad JSON, bad shapes, routing, client keys, request ids.

Everything a client can get wrong is answered in the Anthropic error envelope
with a 4xx status, never a traceback or a 500. One gateway (and one simulated
upstream) serves the whole module from background threads, so the property
test at the end can post many bodies quickly with a plain synchronous client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx2
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from q2api.testing.gateway_server import GatewayThread
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import (
    CLIENT_KEY,
    JSON_BODY,
    JSON_CLIENT_HEADERS,
    MODEL,
    REQUEST_ID,
    assert_error_envelope,
    capture_logs,
    find_secrets,
    gateway_settings,
)

BODY_LIMIT = 2048


@pytest.fixture(scope="module")
def upstream() -> Iterator:
    with SimulatedUpstream.run_in_thread() as handle:
        yield handle


@pytest.fixture(scope="module")
def base_url(upstream, tmp_path_factory) -> Iterator[str]:
    settings = gateway_settings(upstream, tmp_path_factory.mktemp("edge-data"), Q2API_MAX_BODY_BYTES=str(BODY_LIMIT))
    with GatewayThread(settings) as gateway:
        yield gateway.base_url


@pytest.fixture()
def client(base_url) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=base_url, headers=JSON_CLIENT_HEADERS, timeout=10) as http:
        yield http


def request_body(text: str = "hi", **fields) -> dict:
    return {"model": MODEL, "max_tokens": 50, "messages": [{"role": "user", "content": text}], **fields}


def body_of_size(size: int) -> bytes:
    """A valid request body of exactly `size` bytes (the text is padded to fit)."""
    empty = orjson.dumps(request_body(""))
    body = orjson.dumps(request_body("x" * (size - len(empty))))
    assert len(body) == size
    return body


def in_chunks(data: bytes, size: int = 300) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


# ------------------------------------------------------------------ body size


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_over_the_limit_is_413_and_one_at_the_limit_is_served(client, framing) -> None:
    def post(body: bytes) -> httpx2.Response:
        if framing == "chunked":
            response = client.post("/v1/messages", content=in_chunks(body))
            # The check must not rely on a declared length: there is none.
            assert "content-length" not in response.request.headers
            assert response.request.headers["transfer-encoding"] == "chunked"
            return response
        return client.post("/v1/messages", content=body)

    at_limit = post(body_of_size(BODY_LIMIT))
    assert at_limit.status_code == 200, at_limit.text
    over = post(body_of_size(BODY_LIMIT + 1))
    assert over.status_code == 413
    message = assert_error_envelope(over.json(), "request_too_large")
    assert str(BODY_LIMIT) in message


def test_the_sdk_sees_an_oversized_body_as_content_too_large(base_url) -> None:
    client = anthropic.Anthropic(base_url=base_url, api_key=CLIENT_KEY, max_retries=0)
    with pytest.raises(anthropic.ContentTooLargeError) as caught:
        client.messages.create(model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "x" * 5000}])
    assert caught.value.status_code == 413


def test_count_tokens_has_the_same_body_limit(client) -> None:
    response = client.post("/v1/messages/count_tokens", content=body_of_size(BODY_LIMIT + 500))
    assert response.status_code == 413
    assert_error_envelope(response.json(), "request_too_large")


# ------------------------------------------------------------------ bad bodies


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"",
        b'{"model": "m",',
        b"\xff\xfe\x00",
        b'{"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]} trailing',
    ],
    ids=["unquoted-key", "empty", "truncated", "not-utf8", "trailing-garbage"],
)
def test_malformed_json_is_a_400_saying_so(client, body) -> None:
    response = client.post("/v1/messages", content=body)
    assert response.status_code == 400
    message = assert_error_envelope(response.json(), "invalid_request_error")
    assert "JSON" in message


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"model": MODEL, "max_tokens": 50}, "messages"),
        ({"max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}, "model"),
        (request_body(max_tokens="lots"), "max_tokens"),
        (request_body(messages="hi"), "messages"),
        (request_body(messages=[{"role": "user", "content": 5}]), "messages.0.content"),
        (request_body(messages=[{"role": "robot", "content": "hi"}]), "messages.0.role"),
        (
            request_body(messages=[{"role": "user", "content": [{"type": "text", "text": 3}]}]),
            "messages.0.content.0.text",
        ),
        (request_body(messages=[{"role": "user", "content": [{"type": "text"}]}]), "messages.0.content.0"),
        (request_body(system=7), "system"),
        (request_body(tools=[{"description": "no name"}]), "tools.0"),
        (request_body(stream="yes"), "stream"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_wrong_shape_is_a_400_naming_the_field(client, body, path) -> None:
    response = client.post("/v1/messages", content=orjson.dumps(body))
    assert response.status_code == 400, response.text
    message = assert_error_envelope(response.json(), "invalid_request_error")
    assert message.startswith(path), message


def test_a_non_object_body_is_a_400(client) -> None:
    for body in (b"[]", b"null", b"42", b'"text"'):
        response = client.post("/v1/messages", content=body)
        assert response.status_code == 400
        assert "object" in assert_error_envelope(response.json(), "invalid_request_error")


# ------------------------------------------------------------------ routing


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/nope"), ("POST", "/v1/complete"), ("GET", "/")])
def test_an_unknown_path_is_404(client, method, path) -> None:
    response = client.request(method, path)
    assert response.status_code == 404
    assert path in assert_error_envelope(response.json(), "not_found_error")


def test_get_on_messages_is_405_naming_the_allowed_method(client) -> None:
    response = client.get("/v1/messages")
    assert response.status_code == 405
    assert "GET" in assert_error_envelope(response.json(), "invalid_request_error")
    assert response.headers["allow"] == "POST"


# ------------------------------------------------------------------ client keys


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"x-api-key": "not-the-key"},
        {"x-api-key": ""},
        {"authorization": "Bearer not-the-key"},
        {"authorization": f"Basic {CLIENT_KEY}"},
    ],
    ids=["none", "wrong-x-api-key", "empty-x-api-key", "wrong-bearer", "basic-scheme"],
)
def test_a_missing_or_wrong_client_key_is_401(base_url, headers) -> None:
    with httpx2.Client(base_url=base_url, headers=JSON_BODY) as http:
        for method, path in (("POST", "/v1/messages"), ("POST", "/v1/messages/count_tokens"), ("GET", "/v1/models")):
            response = http.request(method, path, content=orjson.dumps(request_body()), headers=headers)
            assert response.status_code == 401, (path, response.text)
            message = assert_error_envelope(response.json(), "authentication_error")
            assert "not-the-key" not in message  # a presented key is never echoed back


def test_every_other_route_writes_one_log_line_with_its_status(base_url) -> None:
    with capture_logs() as logs, httpx2.Client(base_url=base_url, headers=JSON_CLIENT_HEADERS) as http:
        responses = [
            ("INFO", "POST /v1/messages/count_tokens", http.post("/v1/messages/count_tokens", json=request_body())),
            ("INFO", "GET /v1/models", http.get("/v1/models")),
            ("INFO", "GET /v1/nowhere", http.get("/v1/nowhere")),
            ("DEBUG", "GET /healthz", http.get("/healthz")),
        ]
        for level, line, response in responses:
            [record] = logs.eventually_for_request(response.headers["request-id"])
            assert (record.level, record.message, record.extra["status"]) == (level, line, response.status_code)


def test_requests_refused_at_the_edge_still_get_their_log_line(base_url) -> None:
    with capture_logs() as logs, httpx2.Client(base_url=base_url, headers=JSON_BODY) as http:
        refused_key = http.post(
            "/v1/messages", content=orjson.dumps(request_body()), headers={"x-api-key": "presented-key-7f3a"}
        )
        too_large = http.post("/v1/messages", content=b"x" * (BODY_LIMIT + 1), headers={"x-api-key": CLIENT_KEY})
    for response, status in ((refused_key, 401), (too_large, 413)):
        assert response.status_code == status
        lines = [
            record
            for record in logs.for_request(response.headers["request-id"])
            if record.message.startswith("POST /v1/messages")
        ]
        assert len(lines) == 1 and lines[0].extra["status"] == status
    assert "presented-key-7f3a" not in logs.text  # the presented key is never logged


@pytest.mark.parametrize(
    "headers",
    [
        {"x-api-key": CLIENT_KEY},
        {"authorization": f"Bearer {CLIENT_KEY}"},
        {"x-api-key": "", "authorization": f"Bearer {CLIENT_KEY}"},
    ],
    ids=["x-api-key", "bearer", "empty-x-api-key-and-bearer"],
)
def test_the_client_key_is_accepted_in_either_header(base_url, headers) -> None:
    with httpx2.Client(base_url=base_url, headers=JSON_BODY) as http:
        response = http.post("/v1/messages", content=orjson.dumps(request_body()), headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["type"] == "message"


def test_the_sdk_authenticates_with_its_default_header(base_url) -> None:
    client = anthropic.Anthropic(base_url=base_url, api_key=CLIENT_KEY, max_retries=0)
    message = client.messages.create(model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=base_url, api_key="wrong", max_retries=0).messages.create(
            model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}]
        )


def test_no_key_is_needed_when_none_is_configured(upstream, tmp_path) -> None:
    settings = gateway_settings(upstream, tmp_path, Q2API_API_KEYS="")
    assert settings.api_keys == ()
    with (
        GatewayThread(settings) as open_gateway,
        httpx2.Client(base_url=open_gateway.base_url, headers=JSON_BODY) as http,
    ):
        response = http.post("/v1/messages", content=orjson.dumps(request_body()))
        assert response.status_code == 200, response.text
        assert http.get("/v1/models").status_code == 200


def test_healthz_needs_no_key_and_shows_no_secret(base_url) -> None:
    with httpx2.Client(base_url=base_url, headers=JSON_BODY) as http:
        response = http.get("/healthz")
    assert response.status_code == 200
    document = response.json()
    assert document["status"] == "ok"
    assert [(account["id"], account["health"]) for account in document["accounts"]] == [("env", "ready")]
    assert set(document["accounts"][0]) == {"id", "label", "health", "resting_seconds", "credits"}
    assert find_secrets(response.text) == []


# ------------------------------------------------------------------ request ids


def test_every_response_carries_a_request_id(client, base_url) -> None:
    responses = [
        client.post("/v1/messages", content=orjson.dumps(request_body())),
        client.post("/v1/messages", content=orjson.dumps(request_body(stream=True))),
        client.post("/v1/messages", content=b"{"),
        client.post("/v1/messages", content=body_of_size(BODY_LIMIT + 1)),
        client.post("/v1/messages/count_tokens", content=orjson.dumps(request_body())),
        client.get("/v1/models"),
        client.get("/v1/messages"),
        client.get("/v1/nope"),
        client.get("/healthz"),
        httpx2.post(base_url + "/v1/messages", content=b"{}"),  # no key
    ]
    ids = [response.headers.get("request-id", "") for response in responses]
    assert all(REQUEST_ID.match(request_id) for request_id in ids), ids
    assert len(set(ids)) == len(ids)
    for response in responses:
        if response.status_code >= 400:
            assert response.json()["request_id"] == response.headers["request-id"]


# ------------------------------------------------------------------ property: no input is a 500

_json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20)
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_roles = st.sampled_from(["user", "assistant", "system", "tool", ""]) | st.text(max_size=6) | _json_values
_block_types = st.sampled_from(
    ["text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking", "document", "search_result", "nope"]
)
_blocks = st.fixed_dictionaries(
    {"type": _block_types},
    optional={
        "text": _json_values,
        "id": _json_values,
        "name": _json_values,
        "input": _json_values,
        "tool_use_id": _json_values,
        "content": _json_values,
        "source": _json_values,
        "thinking": _json_values,
        "signature": _json_values,
        "is_error": _json_values,
        "cache_control": _json_values,
    },
)
_content = st.text(max_size=30) | st.lists(_blocks, max_size=3) | _json_values
_messages = st.lists(st.fixed_dictionaries({"role": _roles, "content": _content}), max_size=4) | _json_values
_request_like = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from([MODEL, "claude-opus-4-8", "gpt-4", ""]) | _json_values,
        "max_tokens": st.integers(-5, 10**9) | _json_values,
        "messages": _messages,
        "system": st.text(max_size=20) | st.lists(_blocks, max_size=2) | _json_values,
        "tools": st.lists(
            st.fixed_dictionaries(
                {"name": _json_values, "input_schema": _json_values}, optional={"type": _json_values}
            ),
            max_size=2,
        )
        | _json_values,
        "tool_choice": _json_values,
        "thinking": st.fixed_dictionaries(
            {"type": st.sampled_from(["enabled", "adaptive", "disabled", "x"])},
            optional={"budget_tokens": _json_values},
        )
        | _json_values,
        "stop_sequences": _json_values,
        "temperature": _json_values,
        "metadata": _json_values,
        "stream": st.booleans() | _json_values,
    },
)


def _encoded(value: object) -> bytes:
    return json.dumps(value).encode()  # the stdlib: orjson refuses integers beyond 64 bits


_bodies = (
    _request_like.map(_encoded)
    | _json_values.map(_encoded)
    | _request_like.map(lambda value: _encoded(value)[: max(len(_encoded(value)) // 2, 1)])  # cut short
    | st.binary(max_size=64)
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(body=_bodies)
def test_no_body_makes_the_gateway_fail(client, body: bytes) -> None:
    with capture_logs() as logs:
        response = client.post("/v1/messages", content=body)
    assert response.status_code == 200 or 400 <= response.status_code <= 413, (body, response.text)
    assert "Traceback" not in response.text
    if response.status_code != 200:
        assert_error_envelope(response.json(), response.json()["error"]["type"])
    assert not [record for record in logs.lines if record.message.startswith("unhandled error")], logs.text


async def test_a_gateway_bug_is_a_plain_500_envelope_without_internals(tmp_path, monkeypatch) -> None:
    from q2api.server.lifecycle.relay import MessagesRelay
    from q2api.testing.gateway_server import running_gateway

    async def broken(self, *args, **kwargs):
        raise RuntimeError("internal detail sim-access-99 must stay in the log")

    monkeypatch.setattr(MessagesRelay, "handle", broken)
    async with SimulatedUpstream() as sim, running_gateway(gateway_settings(sim, tmp_path)) as url:
        async with httpx2.AsyncClient(base_url=url, headers=JSON_CLIENT_HEADERS) as http:
            response = await http.post("/v1/messages", content=orjson.dumps(request_body()))
    assert response.status_code == 500
    message = assert_error_envelope(response.json(), "api_error")
    assert "internal detail" not in message and "RuntimeError" not in response.text
    assert REQUEST_ID.match(response.headers["request-id"])
    assert response.json()["request_id"] == response.headers["request-id"]
