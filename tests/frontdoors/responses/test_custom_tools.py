"""Custom (freeform) tools: offered to Claude as one-string tools, their calls read back as the text.

What the model writes is the JSON `{"input": text}`; the client must get exactly `text`, as
`custom_tool_call_input.delta` pieces while it streams and whole in the `.done` event and the item,
whatever the JSON's spelling (escapes, spaces) and however the upstream cuts it into pieces.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from q2api.anthropic.types import ToolResultBlock, ToolUseBlock
from q2api.frontdoors.responses.custom_tools import INPUT_FIELD, InputStream, custom_input, custom_tool_description
from q2api.frontdoors.responses.door import echoed_settings
from q2api.frontdoors.responses.message_events import claude_events_of
from q2api.frontdoors.responses.reply import ResponseBuilder, ResponseFrame
from q2api.frontdoors.responses.request import claude_request
from q2api.frontdoors.responses.tools import ToolName
from q2api.openai.errors import InvalidChatRequest
from q2api.openai.responses_types import CustomTool, CustomToolFormatGrammar, parse_responses_request

PATCH = '*** Begin Patch\n*** Add File: hello.txt\n+Hello, "world" \\ é 😀\n*** End Patch\n'
GRAMMAR = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\n'
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files with a patch.",
    "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR},
}
STREAM_EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


def responses(**fields: Any) -> Any:
    return parse_responses_request(json.dumps({"model": "claude-sonnet-5-5", **fields}).encode())


# ---------------------------------------------------------------- the tool offered upstream


def test_a_custom_tool_is_a_claude_tool_taking_one_string():
    translated = claude_request(responses(input="edit it", tools=[APPLY_PATCH]))
    (tool,) = translated.request.tools or []
    assert tool.name == "apply_patch"
    assert list(tool.input_schema["properties"]) == [INPUT_FIELD]
    assert tool.input_schema["properties"][INPUT_FIELD]["type"] == "string"
    assert tool.input_schema["required"] == [INPUT_FIELD] and tool.input_schema["type"] == "object"
    assert tool.description is not None
    assert tool.description.startswith("Edit files with a patch.") and GRAMMAR.strip() in tool.description
    assert "lark grammar" in tool.description
    assert translated.options.tool_names["apply_patch"] == ToolName("apply_patch", custom=True)


def test_a_custom_tool_without_a_format_takes_any_text():
    description = custom_tool_description(CustomTool(name="note"))
    assert "free text" in description and "grammar" not in description
    grammar = CustomToolFormatGrammar(definition="^[a-z]+$", syntax="regex")
    assert "regex grammar" in custom_tool_description(CustomTool(name="word", format=grammar))


def test_custom_tools_in_a_namespace_and_as_the_chosen_tool():
    namespace = {"type": "namespace", "name": "files", "tools": [{"type": "custom", "name": "patch"}]}
    translated = claude_request(
        responses(input="go", tools=[namespace], tool_choice={"type": "custom", "name": "patch", "namespace": "files"})
    )
    assert [tool.name for tool in translated.request.tools or []] == ["files__patch"]
    assert translated.options.tool_names["files__patch"] == ToolName("patch", "files", custom=True)
    assert translated.request.tool_choice is not None and translated.request.tool_choice.name == "files__patch"


def test_tool_choice_names_a_custom_tool_as_custom_and_a_function_as_function():
    function = {"type": "function", "name": "shell", "parameters": {"type": "object"}}
    with pytest.raises(InvalidChatRequest) as refused:
        claude_request(responses(input="x", tools=[function], tool_choice={"type": "custom", "name": "shell"}))
    assert refused.value.param == "tool_choice.name" and "custom tools" in refused.value.message
    with pytest.raises(InvalidChatRequest) as refused:
        claude_request(
            responses(input="x", tools=[APPLY_PATCH], tool_choice={"type": "function", "name": "apply_patch"})
        )
    assert refused.value.param == "tool_choice.name"


def test_a_bad_custom_tool_names_its_field():
    with pytest.raises(InvalidChatRequest) as refused:
        claude_request(responses(input="x", tools=[{"type": "custom", "name": "p", "format": {"type": "grammar"}}]))
    assert refused.value.param is not None and refused.value.param.startswith("tools[0].format")


# ---------------------------------------------------------------- the history


def test_custom_calls_and_their_outputs_in_the_input_become_tool_use_and_tool_result():
    translated = claude_request(
        responses(
            tools=[APPLY_PATCH],
            input=[
                {"role": "user", "content": "add hello.txt"},
                {"type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch", "input": PATCH},
                {"type": "custom_tool_call_output", "call_id": "call_p", "output": "Success. Updated: A hello.txt"},
            ],
        )
    )
    _user, assistant, result = translated.request.messages
    assert assistant.role == "assistant" and isinstance(assistant.content, list)
    (call,) = assistant.content
    assert isinstance(call, ToolUseBlock)
    assert (call.id, call.name, call.input) == ("call_p", "apply_patch", {INPUT_FIELD: PATCH})
    assert result.role == "user" and isinstance(result.content, list)
    (output,) = result.content
    assert isinstance(output, ToolResultBlock) and output.tool_use_id == "call_p"
    assert output.content == "Success. Updated: A hello.txt"
    assert [item["type"] for item in translated.items] == ["message", "custom_tool_call", "custom_tool_call_output"]
    assert translated.items[1]["id"].startswith("ctc_") and translated.items[2]["id"].startswith("ctco_")
    assert translated.param_for("messages.1.content.0") == "input[1]"


def test_a_custom_call_without_a_call_id_is_refused_by_name():
    with pytest.raises(InvalidChatRequest) as refused:
        claude_request(responses(input=[{"type": "custom_tool_call", "name": "apply_patch", "input": "x"}]))
    assert refused.value.param == "input[0].call_id"


# ---------------------------------------------------------------- the reply


def play(tool_input: dict[str, Any]) -> list[dict[str, Any]]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": [{"type": "tool_use", "id": "call_p", "name": "apply_patch", "input": tool_input}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 20},
    }
    parsed = responses(input="edit", tools=[APPLY_PATCH])
    frame = ResponseFrame("resp_1", "claude-sonnet-5-5", echoed_settings(parsed))
    builder = ResponseBuilder(frame, claude_request(parsed).options, report=lambda _: None)
    return builder.add_all(claude_events_of(message))


def test_a_call_of_a_custom_tool_is_a_custom_tool_call_item_with_its_input_events():
    events = play({INPUT_FIELD: PATCH})
    kinds = [event["type"] for event in events]
    assert kinds[2:] == [
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    for event in events:  # each as the openai SDK's own types read it
        STREAM_EVENTS.validate_python(event)
    added, delta, done, item_done, completed = events[2:]
    assert added["item"]["type"] == "custom_tool_call" and added["item"]["input"] == ""
    assert delta["delta"] == PATCH and done["input"] == PATCH
    item = item_done["item"]
    assert (item["type"], item["call_id"], item["name"], item["input"]) == (
        "custom_tool_call",
        "call_p",
        "apply_patch",
        PATCH,
    )
    assert item["id"].startswith("ctc_") and item["id"] == delta["item_id"] == done["item_id"]
    assert completed["response"]["output"] == [item]


def test_a_model_that_renamed_the_input_property_still_gives_the_text():
    events = play({"patch": PATCH})
    (done,) = [event for event in events if event["type"] == "response.custom_tool_call_input.done"]
    assert done["input"] == PATCH
    deltas = "".join(event["delta"] for event in events if event["type"] == "response.custom_tool_call_input.delta")
    assert deltas == PATCH


def test_custom_input_of_other_shapes_is_never_dropped():
    assert custom_input({INPUT_FIELD: "x", "other": 1}) == "x"
    assert custom_input({"a": 1, "b": 2}) == '{"a":1,"b":2}'
    assert custom_input("bare") == "bare"


# ---------------------------------------------------------------- streaming the input


def spellings(text: str) -> list[str]:
    """The JSON of `{"input": text}` as models and encoders write it."""
    return [
        orjson.dumps({INPUT_FIELD: text}).decode(),
        json.dumps({INPUT_FIELD: text}),  # \\uXXXX escapes, surrogate pairs
        '{ "input" :  ' + json.dumps(text, ensure_ascii=False) + " }\n",
    ]


@settings(max_examples=300, deadline=None)
@given(text=st.text(), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12), spelling=st.integers(0, 2))
def test_the_pieces_handed_out_are_the_input_however_the_json_is_cut(text: str, cuts: list[int], spelling: int):
    arguments = spellings(text)[spelling]
    stream = InputStream()
    pieces = []
    start = 0
    for cut in [*sorted({cut % (len(arguments) + 1) for cut in cuts}), len(arguments)]:
        pieces.append(stream.feed(arguments[start:cut]))
        start = cut
    pieces.append(stream.finish(arguments))
    assert "".join(pieces) == stream.input == text
    # Streaming is real: every character of the text was handed out before the JSON was complete.
    assert "".join(pieces[:-1]) == text


@settings(max_examples=100, deadline=None)
@given(text=st.text(min_size=1), other=st.text())
def test_an_object_of_another_shape_gives_its_input_at_the_end(text: str, other: str):
    arguments = json.dumps({"note": other, INPUT_FIELD: text})
    stream = InputStream()
    streamed = stream.feed(arguments)
    assert streamed == "" and stream.finish(arguments) == text == stream.input


def test_json_with_a_raw_line_break_is_read_as_written():
    arguments = '{"input": "line one\nline two"}'  # not JSON to the letter: a model may write it
    stream = InputStream()
    assert stream.feed(arguments) == "line one\nline two"
    assert stream.finish(arguments) == "" and stream.input == "line one\nline two"
