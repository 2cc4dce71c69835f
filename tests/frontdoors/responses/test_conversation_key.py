"""The conversation key a Responses request carries (Codex's session-id / thread-id / prompt_cache_key),
read once and handed to the call for session affinity."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import Headers

from q2api.frontdoors.responses.conversation_key import MAX_KEY_CHARS, ConversationKey, conversation_key
from q2api.frontdoors.responses.door import ResponsesDoor
from q2api.openai.errors import InvalidChatRequest
from q2api.openai.responses_types import parse_responses_request

THREAD = "01a24a1f-d9e4-7730-b675-fcf0d4d779ab"  # as Codex 0.171.0 sent it, in all three places


def test_codex_s_headers_name_the_conversation_before_the_body():
    codex = Headers({"session-id": THREAD, "thread-id": THREAD, "originator": "codex_exec"})
    assert conversation_key(codex, THREAD) == ConversationKey(THREAD, "session-id")
    assert conversation_key(Headers({"Thread-Id": "t-1"}), "cache-1") == ConversationKey("t-1", "thread-id")
    assert conversation_key(Headers({}), "cache-1") == ConversationKey("cache-1", "prompt_cache_key")
    assert conversation_key(Headers({}), None) is None


def test_a_value_that_cannot_be_a_key_is_passed_over():
    assert conversation_key(Headers({"session-id": "   "}), "cache-1") == ConversationKey("cache-1", "prompt_cache_key")
    assert conversation_key(Headers({"session-id": "x" * (MAX_KEY_CHARS + 1)}), None) is None
    assert conversation_key(Headers({}), "tab\there") is None
    assert conversation_key(Headers({}), "ünïcode") is None
    assert conversation_key(Headers({"thread-id": f"  {THREAD}  "}), None) == ConversationKey(THREAD, "thread-id")


@given(
    session=st.one_of(st.none(), st.text(max_size=300)),
    thread=st.one_of(st.none(), st.text(max_size=300)),
    cache=st.one_of(st.none(), st.text(max_size=300)),
)
def test_a_key_is_always_printable_bounded_and_one_of_the_three(
    session: str | None, thread: str | None, cache: str | None
):
    headers = {name: value for name, value in (("session-id", session), ("thread-id", thread)) if value is not None}
    key = conversation_key(headers, cache)
    if key is None:
        return
    assert 0 < len(key.value) <= MAX_KEY_CHARS and key.value.isascii() and key.value.isprintable()
    source_value = {"session-id": session, "thread-id": thread, "prompt_cache_key": cache}[key.source]
    assert source_value is not None and key.value == source_value.strip()


def test_the_call_carries_the_key_its_door_was_given():
    body = json.dumps({"model": "claude-sonnet-5-5", "input": "hi", "prompt_cache_key": THREAD}).encode()
    parsed = parse_responses_request(body)
    assert parsed.prompt_cache_key == THREAD
    key = conversation_key(Headers({}), parsed.prompt_cache_key)
    call = ResponsesDoor(parsed, conversation_key=key).read(body)
    assert call.conversation_key == ConversationKey(THREAD, "prompt_cache_key")
    assert ResponsesDoor(parsed).read(body).conversation_key is None


def test_a_prompt_cache_key_that_is_not_a_string_is_refused_by_name():
    with pytest.raises(InvalidChatRequest) as refused:
        parse_responses_request(json.dumps({"model": "m", "input": "hi", "prompt_cache_key": {"a": 1}}).encode())
    assert refused.value.param == "prompt_cache_key"
