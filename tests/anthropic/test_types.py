"""Edge validation of Claude requests: typed values out, or a 400 that names the field."""

import orjson
import pytest

from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import (
    Message,
    TextBlock,
    ToolResultBlock,
    blocks_of,
    parse_messages_request,
)


def body(**overrides):
    base = {"model": "claude-sonnet-4-5", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    base.update(overrides)
    return orjson.dumps(base)


def test_minimal_request_parses():
    request = parse_messages_request(body())
    assert request.model == "claude-sonnet-4-5"
    assert request.messages == [Message(role="user", content="hi")]


def test_unknown_fields_and_nulls_are_accepted():
    request = parse_messages_request(
        body(
            output_config={"effort": "high"},
            context_management={"edits": []},
            speed="fast",
            metadata={"user_id": None},
            messages=[
                {"role": "system", "content": None, "output_config": {}},
                {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]},
            ],
        )
    )
    assert request.messages[0].role == "system"
    assert blocks_of(request.messages[0]) == []
    assert blocks_of(request.messages[1]) == [TextBlock(text="x")]  # cache_control is accepted and not kept


def test_tool_result_with_nested_blocks():
    request = parse_messages_request(
        body(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "is_error": True,
                            "content": [{"type": "text", "text": "boom"}],
                        }
                    ],
                }
            ]
        )
    )
    block = request.messages[0].content[0]
    assert isinstance(block, ToolResultBlock) and block.is_error and block.content[0].text == "boom"


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        (body(max_tokens="x"), "max_tokens"),
        (body(messages=[]), "messages"),
        (orjson.dumps({"model": "m", "max_tokens": 1}), "messages"),
        (body(messages=[{"role": "user", "content": [{"type": "wat"}]}]), "messages.0.content.0.type"),
        (body(messages=[{"role": "user", "content": [{"type": "text"}]}]), "messages.0.content.0.text"),
        (body(messages=[{"role": "robot", "content": "x"}]), "messages.0.role"),
    ],
)
def test_bad_input_names_the_path(raw, path):
    with pytest.raises(InvalidRequest) as caught:
        parse_messages_request(raw)
    assert caught.value.path == path
    assert caught.value.status == 400
    assert caught.value.message.startswith(f"{path}: ")


def test_malformed_json_is_a_400():
    with pytest.raises(InvalidRequest) as caught:
        parse_messages_request(b"{not json")
    assert caught.value.status == 400 and "not valid JSON" in caught.value.message
