"""A converted request its own order guard finds invalid is repaired or refused — never logged as an
ERROR and sent upstream anyway (issue 30, item 5).

The case found: a history `tool_use` whose tool is no longer offered gets a placeholder spec, whose
description named the tool in full — a name of 11,000 characters made a description past Amazon Q's
10,240, logged "converter produced invalid output" and sent. The placeholder now names at most 200
characters of it. Any other invalid conversion is the door's 400, naming the Amazon Q field, before
any upstream call.
"""

from __future__ import annotations

import pytest

from q2api.amazonq.types import MAX_TOOL_DESCRIPTION_LENGTH
from q2api.conversion import pipeline
from q2api.conversion.report import Finding, FindingKind
from q2api.testing import scripts
from tests.support.gateway_harness import MODEL, capture_logs, open_gateway, user

LONG_NAME = "mcp__" + "x" * 11_000


def history_with_tool(name: str) -> list[dict]:
    return [
        user("read it"),
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}]},
    ]


async def test_a_history_tool_with_a_long_name_gets_a_placeholder_within_the_limit(tmp_path) -> None:
    async with open_gateway(tmp_path) as gw:
        gw.sim.enqueue(scripts.text_reply("ok"))
        with capture_logs() as logs:
            message = await gw.client.messages.create(model=MODEL, max_tokens=64, messages=history_with_tool(LONG_NAME))
        tools = gw.upstream_body()["conversationState"]["currentMessage"]["userInputMessage"][
            "userInputMessageContext"
        ]["tools"]
    assert message.content[0].text == "ok"
    descriptions = [tool["toolSpecification"]["description"] for tool in tools]
    assert descriptions and all(1 <= len(text) <= MAX_TOOL_DESCRIPTION_LENGTH for text in descriptions)
    assert not [line for line in logs.lines if line.level in ("ERROR", "CRITICAL")], logs.text


async def test_an_invalid_conversion_is_refused_with_a_400_and_never_sent(tmp_path, monkeypatch) -> None:
    # A case the converter does not repair (none is known now): the guard's finding stands in for it.
    finding = Finding(FindingKind.FIELD_LIMIT, None, None, "currentMessage.tools[0]: description must be 1..10240")
    monkeypatch.setattr(pipeline, "validate_conversation", lambda payload, checked=None: (finding,))
    async with open_gateway(tmp_path) as gw:
        with capture_logs() as logs:
            async with gw.http() as http:
                response = await http.post(
                    "/v1/messages", json={"model": MODEL, "max_tokens": 64, "messages": [user("hi")]}
                )
                chat = await http.post("/v1/chat/completions", json={"model": MODEL, "messages": [user("hi")]})
        sent = len(gw.sim.requests)
    assert response.status_code == 400
    assert "currentMessage.tools[0]: description must be 1..10240" in response.json()["error"]["message"]
    assert chat.status_code == 400 and chat.json()["error"]["type"] == "invalid_request_error"
    assert sent == 0
    assert not [line for line in logs.lines if line.level in ("ERROR", "CRITICAL")], logs.text
    assert any("converter produced invalid output" in line.message for line in logs.lines if line.level == "WARNING")


@pytest.mark.parametrize("name", ["Read", "x" * 200, "y" * 201])
def test_placeholder_descriptions_name_at_most_200_characters(name: str) -> None:
    from q2api.conversion.tool_specs import placeholder_description

    description = placeholder_description(name)
    assert name[:200] in description and len(description) <= 200 + len("The … tool.")
