"""Fields no Claude request type declares (q2api.anthropic.unknown_fields): named, taken out, the rest read as before."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.anthropic.types import MessagesRequest, read_messages_request

KNOWN: dict[str, Any] = {
    "model": "m",
    "max_tokens": 10,
    "system": [{"type": "text", "text": "be brief"}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {"path": "a", "mystery": 1}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "x"}]}],
        },
    ],
    "tools": [{"name": "Read", "input_schema": {"type": "object", "anything": {"goes": True}}}],
}
# Places a new field could appear, and where it then is (free-form JSON — a tool's input or schema — is never touched).
PLACES = {
    (): "",
    ("system", 0): "system.0.",
    ("messages", 0): "messages.0.",
    ("messages", 0, "content", 0): "messages.0.content.0.",
    ("messages", 1, "content", 0): "messages.1.content.0.",
    ("messages", 2, "content", 0): "messages.2.content.0.",
    ("messages", 2, "content", 0, "content", 0): "messages.2.content.0.content.0.",
    ("tools", 0): "tools.0.",
}


def at(document: Any, place: tuple[Any, ...]) -> Any:
    for step in place:
        document = document[step]
    return document


@settings(max_examples=40, deadline=None)
@given(places=st.sets(st.sampled_from(sorted(PLACES, key=str)), min_size=1), name=st.from_regex(r"\Azz_[a-z]{1,8}\Z"))
def test_unknown_fields_are_named_and_taken_out_and_nothing_else_changes(
    places: set[tuple[Any, ...]], name: str
) -> None:
    document = orjson.loads(orjson.dumps(KNOWN))
    for place in places:
        at(document, place)[name] = {"new": "feature"}
    read = read_messages_request(orjson.dumps(document))
    assert sorted(read.unknown_fields) == sorted(f"{PLACES[place]}{name}" for place in places)
    plain = read_messages_request(orjson.dumps(KNOWN)).request
    assert read.request == plain
    assert isinstance(read.request, MessagesRequest)


def test_a_request_with_only_known_fields_reports_none() -> None:
    assert read_messages_request(orjson.dumps(KNOWN)).unknown_fields == ()
