"""A conversation whose Amazon Q request would be over the upstream's size limit (docs/protocol.md#limits) is
never sent: every door answers 400 with `prompt is too long`, the size and the limit — the wording that
makes Claude Code compact — and no account is blamed for it."""

from __future__ import annotations

import pytest

from tests.support.gateway_harness import MODEL, assert_error_envelope, open_gateway
from tests.support.openai_harness import assert_openai_envelope

LIMIT = 50_000
BIG_TEXT = "word " * 20_000  # 100 kB of prompt: its Amazon Q request is over LIMIT


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/messages", {"model": MODEL, "max_tokens": 32, "messages": [{"role": "user", "content": BIG_TEXT}]}),
        ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": BIG_TEXT}]}),
        ("/v1/responses", {"model": MODEL, "input": BIG_TEXT}),
    ],
    ids=["messages", "chat", "responses"],
)
async def test_a_request_over_the_upstream_limit_is_a_prompt_too_long_400_on_every_door(tmp_path, path, body):
    async with open_gateway(tmp_path, Q2API_UPSTREAM_MAX_REQUEST_BYTES=str(LIMIT)) as gw:
        async with gw.http() as http:
            response = await http.post(path, json=body)
            small = await http.post(path, json={**body, **_small(body)})
    assert response.status_code == 400
    document = response.json()
    if path == "/v1/messages":
        message = assert_error_envelope(document, "invalid_request_error")
    else:
        error = assert_openai_envelope(document["error"])
        message = error["message"]
        assert error["code"] == "context_length_exceeded"  # what OpenAI clients act on
    assert message.startswith("prompt is too long: ")
    assert f"limit of {LIMIT:,} bytes" in message
    size = int(message.split("would be ", 1)[1].split(" bytes", 1)[0].replace(",", ""))
    assert size > LIMIT
    assert small.status_code == 200  # the same door, a body under the limit: served
    assert len(gw.sim.requests) == 1  # the big one never reached Amazon Q


def _small(body: dict) -> dict:
    if "messages" in body:
        return {"messages": [{"role": "user", "content": "hi"}]}
    return {"input": "hi"}
