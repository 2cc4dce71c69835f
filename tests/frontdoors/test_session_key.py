"""Which conversation a request belongs to (q2api.frontdoors.session_key): the first source found, hashed."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from q2api.anthropic.types import MessagesRequest
from q2api.frontdoors.responses.conversation_key import ConversationKey
from q2api.frontdoors.session_key import DoorSession, session_key


def request(messages: list[dict], system: object = None, metadata: dict | None = None) -> MessagesRequest:
    document: dict = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages}
    if system is not None:
        document["system"] = system
    if metadata is not None:
        document["metadata"] = metadata
    return msgspec.convert(document, MessagesRequest)


FIRST = [{"role": "user", "content": "fix the failing test"}]
LATER = [
    {"role": "user", "content": [{"type": "text", "text": "fix the failing test"}]},
    {"role": "assistant", "content": "Looking."},
    {"role": "user", "content": [{"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}]},
]
ALL_HEADERS = {
    "x-claude-code-session-id": "cc-1",
    "session-id": "codex-1",
    "thread-id": "thread-1",
    "x-q2api-session": "mine",
}


@pytest.mark.parametrize(
    ("drop", "door", "metadata", "source"),
    [
        ((), None, {"user_id": "u"}, "claude-code-session"),
        (("x-claude-code-session-id",), None, {"user_id": "u"}, "session-id"),
        (("x-claude-code-session-id", "session-id"), None, {"user_id": "u"}, "thread-id"),
        (
            ("x-claude-code-session-id", "session-id", "thread-id"),
            DoorSession(ConversationKey("pck", "prompt_cache_key"), "resp_1"),
            {"user_id": "u"},
            "prompt_cache_key",
        ),
        (("x-claude-code-session-id", "session-id", "thread-id"), DoorSession(None, "resp_1"), None, "response-chain"),
        (("x-claude-code-session-id", "session-id", "thread-id"), None, {"user_id": "u"}, "metadata.user_id"),
        (("x-claude-code-session-id", "session-id", "thread-id"), None, None, "x-q2api-session"),
        (tuple(ALL_HEADERS), None, None, "prompt-digest"),
    ],
)
def test_the_first_source_found_names_the_conversation(drop, door, metadata, source):
    headers = {name: value for name, value in ALL_HEADERS.items() if name not in drop}
    assert session_key(headers, request(FIRST, metadata=metadata), door).source == source


def test_every_turn_of_a_conversation_without_ids_has_one_key_and_another_conversation_another():
    system = [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    first = session_key({}, request(FIRST, system=system))
    later = session_key({}, request(LATER, system=[{"type": "text", "text": "You are terse."}]))
    assert first.digest == later.digest  # cache marks and later turns change nothing
    assert first.first_turn and not later.first_turn  # a first turn is not held to an account
    other = session_key({}, request([{"role": "user", "content": "write a poem"}], system=system))
    assert other.digest != first.digest
    other_system = session_key({}, request(FIRST, system="You are verbose."))
    assert other_system.digest != first.digest


def test_each_claude_code_subagent_is_a_conversation_of_its_own():
    session = {"x-claude-code-session-id": "cc-1"}
    main = session_key(session, request(FIRST))
    agent = session_key({**session, "x-claude-code-agent-id": "agent-7"}, request(FIRST))
    other = session_key({**session, "x-claude-code-agent-id": "agent-8"}, request(FIRST))
    assert len({main.digest, agent.digest, other.digest}) == 3
    assert agent.source == "claude-code-session"


def test_a_source_is_part_of_the_key():
    by_header = session_key({"x-q2api-session": "same"}, request(FIRST))
    by_user = session_key({}, request(FIRST, metadata={"user_id": "same"}))
    assert by_header.digest != by_user.digest


def test_a_blank_or_overlong_id_is_passed_over():
    assert session_key({"x-claude-code-session-id": "  "}, request(FIRST)).source == "prompt-digest"
    assert session_key({"x-q2api-session": "x" * 5000}, request(FIRST)).source == "prompt-digest"


@given(st.text(min_size=1, max_size=80).filter(lambda text: text.strip() and "\x00" not in text))
def test_the_key_never_holds_the_value(value):
    key = session_key({"x-q2api-session": value}, request(FIRST))
    assert len(key.digest) == 32 and all(char in "0123456789abcdef" for char in key.digest)
    assert value.strip() not in key.digest or len(value.strip()) < 4
