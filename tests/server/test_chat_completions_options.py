"""The OpenAI door's options and surroundings, through the real gateway and the official `openai` SDK.

Reasoning shown only when asked for, `response_format` instructed then checked, `models.list()`,
the client keys, the debug summary and reproducer, and the request metrics.
"""

from __future__ import annotations

import base64
import json

import httpx2
import openai
import pytest

from q2api.testing import scripts
from tests.support.gateway_harness import MODEL, Gateway, capture_logs, current_user_message, open_gateway
from tests.support.metrics_scrape import Scrape
from tests.support.openai_harness import (
    PNG_BYTES,
    assert_openai_envelope,
    openai_client,
    stream_chunks,
    streamed_text,
    user,
)


async def test_reasoning_appears_only_when_asked_for(gw: Gateway):
    gw.sim.enqueue(
        scripts.thinking_reply("Let me think.", "The answer is 4.", style="reasoning"),
        scripts.thinking_reply("Let me think.", "The answer is 4.", style="reasoning"),
    )
    async with openai_client(gw) as client:
        asked = await stream_chunks(client, messages=[user("2+2?")], reasoning_effort="high")
        hint = current_user_message(gw.upstream_body())["content"]
        plain = await client.chat.completions.create(model=MODEL, messages=[user("2+2?")])
    reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in asked if c.choices)
    assert reasoning == "Let me think." and streamed_text(asked) == "The answer is 4."
    assert "<max_thinking_length>32768</max_thinking_length>" in hint
    assert plain.choices[0].message.content == "The answer is 4."
    assert getattr(plain.choices[0].message, "reasoning_content", None) is None


async def test_json_response_format_is_instructed_and_checked(gw: Gateway):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    json_schema = {"type": "json_schema", "json_schema": {"name": "number", "schema": schema}}
    # Each wrong reply gets one repair turn (issue 32), which is wrong again here.
    gw.sim.enqueue(
        scripts.text_reply('{"n": 4}'),
        scripts.text_reply("Sure! n is 4"),
        scripts.text_reply("Sure! n is 4, really"),
        scripts.text_reply('{"n": "four"}'),
        scripts.text_reply('{"n": "four"}'),
    )
    async with openai_client(gw) as client:
        good = await client.chat.completions.create(model=MODEL, messages=[user("n?")], response_format=json_schema)
        instructions = gw.upstream_body()["conversationState"]["history"][0]["userInputMessage"]["content"]
        with pytest.raises(openai.UnprocessableEntityError) as prose:
            await client.chat.completions.create(
                model=MODEL, messages=[user("n?")], response_format={"type": "json_object"}
            )
        with pytest.raises(openai.APIError) as mismatch:
            await stream_chunks(client, messages=[user("n?")], response_format=json_schema)
    assert json.loads(good.choices[0].message.content) == {"n": 4}
    assert "JSON schema" in instructions and '"required":["n"]' in instructions
    assert assert_openai_envelope(prose.value.body)["code"] == "invalid_response_format"
    assert "not valid JSON" in prose.value.body["message"]
    assert mismatch.value.body["code"] == "invalid_response_format" and "at n" in mismatch.value.body["message"]


# -- the model list ----------------------------------------------------------------


async def test_models_list_works_for_the_openai_sdk(gw: Gateway):
    async with openai_client(gw) as client:
        models = [model async for model in client.models.list()]
    assert MODEL in {model.id for model in models}
    assert all(model.object == "model" and model.owned_by and isinstance(model.created, int) for model in models)


async def test_the_same_client_keys_guard_the_door(gw: Gateway):
    async with openai_client(gw, api_key="not-a-key") as client:
        with pytest.raises(openai.AuthenticationError) as caught:
            await client.chat.completions.create(model=MODEL, messages=[user("hi")])
    assert assert_openai_envelope(caught.value.body)["type"] == "authentication_error"
    async with httpx2.AsyncClient(base_url=gw.base_url) as raw:
        response = await raw.post("/v1/chat/completions", json={"model": MODEL, "messages": [user("hi")]})
    assert response.status_code == 401 and set(response.json()) == {"error"}
    assert gw.sim.requests == []


async def test_the_debug_summary_and_the_redacted_reproducer_cover_this_door(tmp_path):
    big_image = base64.b64encode(PNG_BYTES * 40_000).decode()  # ~2.7 MB: prepared off the event loop
    async with open_gateway(tmp_path, DEBUG_MESSAGE_CONVERSION="true", Q2API_LOG_LEVEL="DEBUG") as gw:
        gw.sim.enqueue(scripts.text_reply("seen"))
        with capture_logs() as logs:
            async with openai_client(gw) as client:
                completion = await client.chat.completions.create(
                    model=MODEL,
                    messages=[
                        {"role": "system", "content": "be brief"},
                        {
                            "role": "user",
                            "content": [
                                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{big_image}"}}
                            ],
                        },
                    ],
                )
    assert completion.choices[0].message.content == "seen"
    assert any(line.message.lstrip().startswith("=== Message Conversion Debug ===") for line in logs.lines)
    (reproducer,) = [line.message for line in logs.lines if line.message.startswith("Claude request (redacted)")]
    assert '"role":"user"' in reproducer and "be brief" in reproducer
    assert big_image[:64] not in logs.text and "base64 characters>" in reproducer


async def test_metrics_count_this_door_under_its_own_route(gw: Gateway):
    async def scrape() -> Scrape:
        async with httpx2.AsyncClient(base_url=gw.base_url, timeout=10) as http:
            return Scrape((await http.get("/metrics")).text)

    def served(scrape: Scrape) -> float:
        return scrape.total("q2api_requests_total", route="/v1/chat/completions", status="200")

    before = await scrape()
    gw.sim.enqueue(scripts.text_reply("one"), scripts.text_reply("two"))
    async with openai_client(gw) as client:
        await client.chat.completions.create(model=MODEL, messages=[user("json")])
        await stream_chunks(client, messages=[user("stream")])
    after = await scrape()
    assert served(after) - served(before) == 2
    assert after.value("q2api_active_streams") == 0
