"""OpenAI request parsing: strict where the gateway relies on it, lenient elsewhere, errors name the field."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from q2api.openai.errors import InvalidChatRequest, OpenAIError
from q2api.openai.shapes import model_list
from q2api.openai.types import AssistantMessage, ImagePart, ToolMessage, parse_chat_request


def parse(**fields: Any):
    return parse_chat_request(orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}))


def test_unknown_fields_and_nulls_are_accepted():
    request = parse(user="u", seed=1, metadata={"a": "b"}, logit_bias={}, store=False, max_tokens=None, tools=None)
    assert request.output_limit is None and request.stop_sequences == []
    assert parse(stop=["a", "b"]).stop_sequences == ["a", "b"]


def test_every_role_and_part_shape():
    request = parse_chat_request(
        orjson.dumps(
            {
                "model": "m",
                "messages": [
                    {"role": "user", "name": "ann", "content": [{"type": "image_url", "image_url": {"url": "data:x"}}]},
                    {
                        "role": "assistant",
                        "content": [{"type": "refusal", "refusal": "no"}],
                        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                    },
                    {"role": "tool", "tool_call_id": "c", "content": "r"},
                ],
            }
        )
    )
    user, assistant, tool = request.messages
    assert isinstance(user.content[0], ImagePart) and user.name == "ann"
    assert isinstance(assistant, AssistantMessage) and assistant.tool_calls[0].id == "c"
    assert isinstance(tool, ToolMessage) and tool.tool_call_id == "c"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"model": ""}, "model"),
        ({"messages": [{"role": "user"}]}, "messages[0].content"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        ({"tools": [{"type": "code_interpreter"}]}, "tools[0].type"),
        ({"tool_choice": "sometimes"}, "tool_choice"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"response_format": {"type": "yaml"}}, "response_format.type"),
        ({"max_completion_tokens": 0}, "max_completion_tokens"),
        ({"top_p": 1.5}, "top_p"),
    ],
)
def test_invalid_fields_are_named(fields: dict[str, Any], param: str):
    with pytest.raises(InvalidChatRequest) as caught:
        parse(**fields)
    error = caught.value
    assert error.param == param and error.status == 400
    assert error.envelope() == {
        "error": {"message": error.message, "type": "invalid_request_error", "param": param, "code": None}
    }


def test_a_body_that_is_not_json():
    with pytest.raises(InvalidChatRequest) as caught:
        parse_chat_request(b"{")
    assert caught.value.param is None and caught.value.message.startswith("request body is not valid JSON")


def test_error_types_follow_the_status():
    assert OpenAIError(429, "slow down").error_type == "rate_limit_error"
    assert OpenAIError(503, "busy").error_type == "server_error"
    assert OpenAIError(401, "who?").body()["type"] == "authentication_error"


def test_model_list_adds_the_openai_fields_without_losing_the_anthropic_ones():
    page = {"data": [{"type": "model", "id": "a", "display_name": "A"}], "has_more": False}
    listed = model_list(page, owned_by="me")
    assert listed["object"] == "list" and listed["has_more"] is False
    assert listed["data"] == [
        {"object": "model", "created": 0, "owned_by": "me", "type": "model", "id": "a", "display_name": "A"}
    ]
