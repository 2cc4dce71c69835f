"""No function output (nor earlier web search) is lost when a Responses conversation is converted (hypothesis).

Conversations of user messages, assistant text, reasoning, web searches, rounds of parallel
function calls and their outputs (in any order, some outputs answering calls that are gone, some split between
the stored conversation and the new input) go through the door and the converter exactly as the
gateway runs them: every output's text reaches Amazon Q, with its call when the call is there,
every search's query and sources reach it as context, and the result is a valid conversation.
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from q2api.anthropic.errors import AnthropicError
from q2api.conversion.claude_converter import convert_claude_request
from q2api.conversion.order_guard import validate_conversation
from q2api.frontdoors.responses.request import claude_request
from q2api.openai.errors import OpenAIError
from q2api.openai.responses_types import parse_responses_request
from tests.support.converter_helpers import all_text, all_tool_results, table_options

Item = dict[str, Any]


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[Item], list[Item], dict[str, str], list[str]]:
    """(stored items, input items, every call id → its output text, the texts of earlier searches)."""
    serial = itertools.count()

    def marker(prefix: str) -> str:
        return f"{prefix}-{next(serial)}-{draw(st.text('abcxyz ', min_size=0, max_size=6))}"

    items: list[Item] = [{"role": "user", "content": marker("ask")}]
    outputs: dict[str, str] = {}
    searched: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            items.append(
                {"type": "reasoning", "id": marker("rs"), "summary": [{"type": "summary_text", "text": marker("why")}]}
            )
        if draw(st.booleans()):
            items.append(
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": marker("say")}]}
            )
        if draw(st.booleans()):  # an earlier web search, with its sources when the client kept them
            query, source = marker("query"), f"https://{next(serial)}.example.test/"
            action: Item = {"type": "search", "query": query}
            status = draw(st.sampled_from(["completed", "failed", None]))
            if status != "failed" and draw(st.booleans()):  # a failed search found nothing
                action["sources"] = [{"type": "url", "url": source}]
                searched.append(source)
            items.append({"type": "web_search_call", "id": marker("ws"), "status": status, "action": action})
            searched.append(query)
        calls = [f"call_{next(serial)}" for _ in range(draw(st.integers(0, 3)))]
        for call in calls:
            items.append(
                {
                    "type": "function_call",
                    "call_id": call,
                    "name": "shell",
                    "arguments": orjson.dumps({"cmd": marker("cmd")}).decode(),
                }
            )
        answered = draw(st.permutations(calls)) if calls else []
        for call in answered[: draw(st.integers(0, len(answered)))] if answered else []:
            output = marker("out")
            outputs[call] = output
            items.append({"type": "function_call_output", "call_id": call, "output": output})
        if draw(st.booleans()):
            items.append({"role": "user", "content": marker("more")})
    if draw(st.booleans()):  # an output whose call was never sent (compacted away by the client)
        outputs["call_orphan"] = marker("orphan")
        items.append({"type": "function_call_output", "call_id": "call_orphan", "output": outputs["call_orphan"]})
    if items[-1].get("type") in ("function_call", "reasoning") or items[-1].get("role") == "assistant":
        items.append({"role": "user", "content": marker("go on")})
    split = draw(st.integers(0, len(items) - 1))
    return items[:split], items[split:], outputs, searched


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_every_function_output_reaches_amazon_q(case):
    history, new_input, outputs, searched = case
    body = {
        "model": "claude-sonnet-4-5",
        "input": new_input,
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}, {"type": "web_search"}],
    }
    translated = claude_request(parse_responses_request(orjson.dumps(body)), history)
    conversion = convert_claude_request(translated.request, table_options("claude-sonnet-4-5"))

    assert validate_conversation(conversion.payload) == ()
    results = {
        result["toolUseId"]: "\n".join(block["text"] for block in result["content"])
        for result in all_tool_results(conversion)
    }
    corpus = all_text(conversion)
    for call_id, output in outputs.items():
        if call_id in results:
            assert output in results[call_id]
        else:  # its call is not in the conversation: kept as labelled text, never dropped
            assert output in corpus, (call_id, output)
    for text in searched:
        assert text in corpus, text
    # The stored items are read back the way the store keeps them: typed, with ids.
    assert all(item["id"] and item["type"] for item in translated.items)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab\u00e9 ", max_size=4),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["type", "role", "content", "text", "name", "call_id", "output", "arguments", "x"]),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)
ITEM_TYPES = st.sampled_from(
    ["message", "function_call", "function_call_output", "reasoning", "web_search_call", "item_reference", None, 7]
)
FIELDS = st.sampled_from(
    [
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "reasoning",
        "text",
        "metadata",
        "store",
        "truncation",
        "include",
        "temperature",
    ]
)


@st.composite
def hostile_bodies(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "input": [{"role": "user", "content": "hi"}]}
    for _ in range(draw(st.integers(0, 3))):
        item = draw(
            st.dictionaries(
                st.sampled_from(
                    ["role", "content", "call_id", "name", "arguments", "output", "summary", "id", "action", "status"]
                ),
                JSON_VALUES,
                max_size=4,
            )
        )
        kind = draw(ITEM_TYPES)
        if kind is not None:
            item["type"] = kind
        body["input"].append(item)
    for field in draw(st.lists(FIELDS, max_size=3, unique=True)):
        body[field] = draw(JSON_VALUES)
    return body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_bodies())
def test_any_body_is_translated_or_refused_with_a_400(body):
    """Whatever a client sends, the door and the converter answer with a request or a 4xx naming why."""
    try:
        translated = claude_request(parse_responses_request(orjson.dumps(body)))
    except OpenAIError as error:
        assert 400 <= error.status < 500 and error.message
        return
    try:
        convert_claude_request(translated.request, table_options("claude-sonnet-4-5"))
    except AnthropicError as error:
        assert 400 <= error.status < 500 and error.message
