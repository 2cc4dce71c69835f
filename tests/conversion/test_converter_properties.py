"""Property tests over generated Anthropic conversations.

Whatever the shape (interleaved text and images, parallel tool_use / tool_result, consecutive
same-role turns, orphan and missing results, system turns, prefill, leading assistant turns),
the converted request passes the guards' order validation, holds no null, and loses nothing:
every text, every tool result and every image is present (images up to the per-message cap,
the rest reported).
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings

from q2api.amazonq.types import MAX_IMAGES_PER_MESSAGE
from q2api.anthropic.types import parse_messages_request
from q2api.conversion.claude_converter import ConversionOptions, convert_claude_request
from q2api.conversion.order_guard import validate_conversation
from q2api.models.table import resolve_model
from tests.support.conversation_strategies import conversations
from tests.support.converter_helpers import all_text, all_tool_results, assistant_messages, user_messages


def _convert(body: dict[str, Any]):
    return convert_claude_request(
        request := parse_messages_request(orjson.dumps(body)),
        ConversionOptions(conversation_id="prop", model=resolve_model(request.model)),
    )


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations())
def test_converted_conversations_are_valid_and_complete(case):
    body, expected = case
    conversion = _convert(body)

    assert validate_conversation(conversion.payload) == ()  # order, pairing, names, limits, no nulls
    assert b"null" not in orjson.dumps(conversion.payload)

    corpus = all_text(conversion)
    for value in expected.texts:
        assert value in corpus

    results_by_id: dict[str, str] = {}
    for result in all_tool_results(conversion):
        results_by_id.setdefault(result["toolUseId"], "")
        results_by_id[result["toolUseId"]] += "\n".join(block["text"] for block in result["content"])
    for tool_id, texts in expected.tool_results:
        if tool_id in results_by_id:
            assert all(value in results_by_id[tool_id] for value in texts)
        else:  # an orphan: labelled text in the user content
            assert tool_id in corpus and all(value in corpus for value in texts)

    sent_tool_uses = [
        tool["toolUseId"] for message in assistant_messages(conversion) for tool in message.get("toolUses", [])
    ]
    assert sorted(sent_tool_uses) == sorted(expected.tool_uses)

    sent_images = [
        image["source"]["bytes"] for message in user_messages(conversion) for image in message.get("images", [])
    ]
    assert all(len(message.get("images", [])) <= MAX_IMAGES_PER_MESSAGE for message in user_messages(conversion))
    dropped = sum(1 for finding in conversion.report if finding.kind == "image_dropped")
    assert set(sent_images) <= set(expected.images)
    assert len(sent_images) == len(set(sent_images))
    assert len(sent_images) + dropped == len(expected.images)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_conversion_is_deterministic(case):
    body, _ = case
    first, second = _convert(body), _convert(body)
    assert orjson.dumps(first.payload) == orjson.dumps(second.payload)
    assert first.tool_names == second.tool_names and first.report == second.report
