from __future__ import annotations

import json
import urllib.request
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest

from q2api.amazonq.eventstream import ChecksumMismatch, EventStreamDecoder, Frame, TruncatedStream
from q2api.testing import scripts
from q2api.testing.simulated_upstream import SIM_CLIENT_ID, SIM_CLIENT_SECRET, SimulatedUpstream

PAYLOAD = {"conversationState": {"currentMessage": {"userInputMessage": {"content": "ping"}}}}


@pytest.fixture
async def sim() -> AsyncIterator[SimulatedUpstream]:
    async with SimulatedUpstream() as simulator:
        yield simulator


async def post(url: str, body: object, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as session:
        async with session.post(url, data=orjson.dumps(body), headers=headers or {}) as response:
            return response.status, dict(response.headers), await response.read()


def frames_of(data: bytes) -> list[Frame]:
    decoder = EventStreamDecoder()
    frames = decoder.feed(data)
    decoder.close()
    return frames


def payloads(frames: list[Frame], event_type: str) -> list[dict]:
    return [orjson.loads(frame.payload) for frame in frames if frame.event_type == event_type]


async def test_text_reply_in_chunks_with_usage(sim) -> None:
    sim.enqueue(scripts.text_reply("abcdefghij", chunks=4, input_tokens=7, output_tokens=3))
    status, headers, body = await post(sim.url, PAYLOAD, {"Authorization": "Bearer t"})
    assert status == 200 and headers["Content-Type"] == "application/vnd.amazon.eventstream"
    assert headers["x-amzn-requestid"]
    frames = frames_of(body)
    assert "".join(p["content"] for p in payloads(frames, "assistantResponseEvent")) == "abcdefghij"
    assert len(payloads(frames, "assistantResponseEvent")) == 4
    assert payloads(frames, "metadataEvent") == [
        {"tokenUsage": {"uncachedInputTokens": 7, "outputTokens": 3, "totalTokens": 10}}
    ]
    request = sim.requests[0]
    assert request.body == PAYLOAD and request.access_token == "t" and request.received_at > 0


async def test_thinking_styles(sim) -> None:
    sim.enqueue(scripts.thinking_reply("hmm", "answer"), scripts.thinking_reply("deep", "done", style="reasoning"))
    _, _, tagged = await post(sim.url, PAYLOAD)
    _, _, reasoned = await post(sim.url, PAYLOAD)
    assert "".join(p["content"] for p in payloads(frames_of(tagged), "assistantResponseEvent")) == (
        "<thinking>hmm</thinking>answer"
    )
    reasoning = payloads(frames_of(reasoned), "reasoningContentEvent")
    assert reasoning == [{"text": "deep"}, {"signature": "sim-sig"}]


async def test_tool_use_input_arrives_in_fragments(sim) -> None:
    tool_input = {"path": "/tmp/x", "content": "hello " * 5}
    sim.enqueue(scripts.tool_reply("Write", tool_input, tool_use_id="tooluse_1", text_before="Writing", fragments=4))
    _, _, body = await post(sim.url, PAYLOAD)
    events = payloads(frames_of(body), "toolUseEvent")
    assert events[0] == {"toolUseId": "tooluse_1", "name": "Write"}
    assert events[-1] == {"toolUseId": "tooluse_1", "name": "Write", "stop": True}
    fragments = [event["input"] for event in events[1:-1]]
    assert len(fragments) == 4
    assert json.loads("".join(fragments)) == tool_input


async def test_http_errors_carry_type_header_and_body(sim) -> None:
    sim.enqueue(scripts.context_overflow(), scripts.throttled(retry_after=3), scripts.bearer_invalid())
    status, headers, body = await post(sim.url, PAYLOAD)
    assert status == 400
    assert headers["x-amzn-errortype"].startswith("ValidationException:")
    assert orjson.loads(body) == {
        "__type": "com.amazon.aws.codewhisperer#ValidationException",
        "message": "Input is too long.",
        "reason": "CONTENT_LENGTH_EXCEEDS_THRESHOLD",
    }
    status, headers, _ = await post(sim.url, PAYLOAD)
    assert status == 429 and headers["Retry-After"] == "3"
    status, _, body = await post(sim.url, PAYLOAD)
    assert status == 403 and orjson.loads(body)["message"] == scripts.BEARER_INVALID_MESSAGE


async def test_monthly_quota_is_a_400_throttling_exception(sim) -> None:
    sim.enqueue(scripts.monthly_quota())
    status, _, body = await post(sim.url, PAYLOAD)
    document = orjson.loads(body)
    assert status == 400 and document["reason"] == "MONTHLY_REQUEST_COUNT"
    assert document["message"].endswith("reached for this month.")


async def test_faulty_streams(sim) -> None:
    sim.enqueue(
        scripts.mid_stream_exception(reason="MODEL_TEMPORARILY_UNAVAILABLE"),
        scripts.truncated_reply(),
        scripts.corrupted_reply(),
    )
    _, _, body = await post(sim.url, PAYLOAD)
    last = frames_of(body)[-1]
    assert last.message_type == "exception" and last.exception_type == "error"
    assert orjson.loads(last.payload)["reason"] == "MODEL_TEMPORARILY_UNAVAILABLE"

    _, _, body = await post(sim.url, PAYLOAD)
    decoder = EventStreamDecoder()
    assert decoder.feed(body)  # the complete frames before the cut
    with pytest.raises(TruncatedStream):
        decoder.close()

    _, _, body = await post(sim.url, PAYLOAD)
    with pytest.raises(ChecksumMismatch):
        EventStreamDecoder().feed(body)


async def test_check_tokens_rejects_unknown_tokens(sim) -> None:
    sim.check_tokens = True
    good = sim.issue_access_token()
    assert (await post(sim.url, PAYLOAD, {"Authorization": "Bearer nope"}))[0] == 403
    assert (await post(sim.url, PAYLOAD, {"Authorization": f"Bearer {good}"}))[0] == 200
    sim.revoke_access_tokens()
    assert (await post(sim.url, PAYLOAD, {"Authorization": f"Bearer {good}"}))[0] == 403


async def test_responder_and_echo(sim) -> None:
    _, _, body = await post(sim.url, PAYLOAD)
    text = "".join(p["content"] for p in payloads(frames_of(body), "assistantResponseEvent"))
    assert "simulated" in text and "ping" in text

    sim.responder = lambda request: scripts.text_reply(
        "picked for " + request.body["conversationState"]["currentMessage"]["userInputMessage"]["content"]
    )
    _, _, body = await post(sim.url, PAYLOAD)
    assert payloads(frames_of(body), "assistantResponseEvent") == [{"content": "picked for ping"}]


async def test_oidc_refresh_issues_and_rotates(sim) -> None:
    sim.rotate_refresh_tokens = True
    sim.valid_refresh_tokens = {"r0"}
    request = {
        "clientId": SIM_CLIENT_ID,
        "clientSecret": SIM_CLIENT_SECRET,
        "grantType": "refresh_token",
        "refreshToken": "r0",
    }
    status, _, body = await post(sim.oidc_url + "/token", request)
    issued = orjson.loads(body)
    assert status == 200 and issued["accessToken"] in sim.valid_access_tokens and issued["expiresIn"] == 3600
    assert sim.valid_refresh_tokens == {issued["refreshToken"]}

    status, headers, body = await post(sim.oidc_url + "/token", request)  # the retired token
    assert status == 400 and orjson.loads(body)["error"] == "invalid_grant"
    assert headers["x-amzn-ErrorType"].startswith("InvalidGrantException")

    status, _, _ = await post(sim.oidc_url + "/token", {**request, "clientSecret": "wrong"})
    assert status == 401
    assert sim.refresh_calls == 3


async def test_kiro_refresh(sim) -> None:
    status, _, body = await post(sim.kiro_refresh_url, {"refreshToken": "kiro-r"})
    issued = orjson.loads(body)
    assert status == 200 and issued["profileArn"].startswith("arn:aws:codewhisperer")
    assert issued["refreshToken"] == "kiro-r"
    sim.refresh_failure = "server_error"
    assert (await post(sim.kiro_refresh_url, {"refreshToken": "kiro-r"}))[0] == 500


def test_runs_in_a_thread_for_synchronous_callers() -> None:
    with SimulatedUpstream.run_in_thread() as handle:
        handle.enqueue(scripts.text_reply("threaded"))
        request = urllib.request.Request(handle.url, data=orjson.dumps(PAYLOAD), method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        assert payloads(frames_of(body), "assistantResponseEvent") == [{"content": "threaded"}]
        assert handle.env()["AMAZONQ_ENDPOINT"] == handle.url
    assert handle.sim.open_connections == 0


def test_split_text_keeps_every_character() -> None:
    for text in ("", "a", "abcdefg", "x" * 101):
        for chunks in (1, 2, 3, 50):
            pieces = scripts.split_text(text, chunks)
            assert "".join(pieces) == text
            assert all(pieces) or text == ""


def with_model(model_id: str) -> dict:
    return {"conversationState": {"currentMessage": {"userInputMessage": {"content": "ping", "modelId": model_id}}}}


async def test_it_can_reject_model_ids_outside_the_catalogue_as_amazon_q_does(sim):
    sim.services.reject_unknown_models = True
    status, _headers, _body = await post(sim.url, with_model("claude-sonnet-4.5"))
    assert status == 200
    status, headers, body = await post(sim.url, with_model("claude-opus-9.9"))
    assert status == 400
    assert headers["x-amzn-errortype"].startswith("ValidationException")
    assert orjson.loads(body)["reason"] == "INVALID_MODEL_ID"


async def test_the_service_calls_answer_in_both_flavours_and_are_not_chat_requests(sim):
    target = {"X-Amz-Target": "AmazonCodeWhispererService.GetUsageLimits", "Authorization": "Bearer t"}
    status, _headers, body = await post(sim.url, {"origin": "AI_EDITOR"}, target)
    assert status == 200 and orjson.loads(body)["subscriptionInfo"]["subscriptionTitle"] == "KIRO FREE"
    async with aiohttp.ClientSession() as session:
        async with session.get(sim.base_url + "/ListAvailableModels", params={"maxResults": "2"}) as response:
            page = await response.json()
    assert len(page["models"]) == 2 and page["nextToken"] == "2"
    assert sim.requests == []  # only GenerateAssistantResponse calls are recorded there
    assert [(flavour, operation) for flavour, operation, _ in sim.services.requests] == [
        ("aws_json", "GetUsageLimits"),
        ("rest", "ListAvailableModels"),
    ]
