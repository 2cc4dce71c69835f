"""Opt-in history trimming: whole oldest rounds left out when a body is over Amazon Q's limits, never
the first user message, never half a tool pair, with a marker saying what was left out."""

from __future__ import annotations

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from q2api.anthropic.types import parse_messages_request
from q2api.conversion.claude_converter import convert_claude_request
from q2api.conversion.normalization import normalization_record
from q2api.conversion.order_guard import validate_conversation
from q2api.conversion.system_context import CONTEXT_ACKNOWLEDGEMENT
from q2api.conversion.trimming import TRIM_ACKNOWLEDGEMENT, TrimMode, TrimPolicy, trim_history
from tests.support.conversation_strategies import conversations
from tests.support.converter_helpers import assistant, convert, table_options, tool_result, tool_use, user

OLDEST = TrimMode.OLDEST


def rounds(count: int, result: str = "ok") -> list[dict]:
    """The task, then `count` tool rounds (call and result), then nothing: the last result is current."""
    messages = [user("Refactor the billing module.")]
    for number in range(count):
        messages.append(assistant([tool_use(f"toolu_{number}", "Read", {"file_path": f"/src/{number}.py"})]))
        messages.append(user([tool_result(f"toolu_{number}", result)]))
    return messages


def history_of(conversion):
    return conversion.payload["conversationState"].get("history", [])


def body_bytes(conversion) -> int:
    return len(orjson.dumps(conversion.payload))


def test_over_the_history_cap_whole_oldest_rounds_go_and_a_marker_says_so():
    conversion = convert(rounds(150))  # 300 history messages
    trimmed = trim_history(conversion, TrimPolicy(OLDEST))
    history = history_of(trimmed)
    assert len(history) <= 198
    assert history[0] == history_of(conversion)[0]  # the task
    assert history[1] == {"assistantResponseMessage": {"content": TRIM_ACKNOWLEDGEMENT}}
    marker = history[2]["userInputMessage"]["content"]
    assert marker.startswith("[q2api left out ") and "198 history messages" in marker
    assert history[3:] == history_of(conversion)[len(history_of(conversion)) - len(history) + 3 :]  # the newest, whole
    assert validate_conversation(trimmed.payload) == ()
    [finding] = [finding for finding in trimmed.report if finding.kind == "history_trimmed"]
    assert finding.severity == "warning"
    record = normalization_record(301, trimmed)
    assert record is not None and record.changes["history_trimmed"] == 1 and record.after == len(history) + 1


def test_over_the_byte_limit_rounds_go_until_the_body_fits():
    conversion = convert(rounds(40, result="x" * 5_000))  # ~200 KB
    policy = TrimPolicy(OLDEST, max_body_bytes=50_000)
    trimmed = trim_history(conversion, policy)
    assert body_bytes(trimmed) <= 50_000 < body_bytes(conversion)
    assert validate_conversation(trimmed.payload) == ()
    # Not more than needed: one more round would have fitted too.
    assert body_bytes(trimmed) > 50_000 - 2 * 5_200


def test_the_system_context_pair_and_the_first_user_message_stay():
    conversion = convert(rounds(120), system="You are a careful engineer.")
    trimmed = trim_history(conversion, TrimPolicy(OLDEST))
    history = history_of(trimmed)
    assert history[1]["assistantResponseMessage"]["content"] == CONTEXT_ACKNOWLEDGEMENT
    assert history[:3] == history_of(conversion)[:3]
    assert history[3]["assistantResponseMessage"]["content"] == TRIM_ACKNOWLEDGEMENT
    assert validate_conversation(trimmed.payload) == ()


def test_off_or_under_the_limits_nothing_changes():
    conversion = convert(rounds(150))
    assert trim_history(conversion, TrimPolicy()) is conversion  # off is the default
    small = convert(rounds(3))
    assert trim_history(small, TrimPolicy(OLDEST)) is small


def test_a_body_that_nothing_can_shrink_goes_as_it_is():
    conversion = convert([user("x" * 300_000)])
    assert trim_history(conversion, TrimPolicy(OLDEST, max_body_bytes=100_000)) is conversion


def test_trimming_reports_when_even_every_round_is_not_enough():
    conversion = convert([user("y" * 60_000), *rounds(5)[1:]])
    trimmed = trim_history(conversion, TrimPolicy(OLDEST, max_body_bytes=50_000))
    [finding] = [finding for finding in trimmed.report if finding.kind == "history_trimmed"]
    assert "still over it" in finding.detail
    assert validate_conversation(trimmed.payload) == ()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=conversations(), max_messages=st.integers(2, 16), max_bytes=st.integers(300, 6_000))
def test_trimming_never_breaks_a_tool_pair_nor_drops_the_first_user_message(case, max_messages, max_bytes):
    body, _ = case
    request = parse_messages_request(orjson.dumps(body))
    conversion = convert_claude_request(request, table_options(request.model))
    trimmed = trim_history(conversion, TrimPolicy(OLDEST, max_body_bytes=max_bytes, max_history_messages=max_messages))
    # Valid for Amazon Q: every toolUse answered by the very next user message, every toolResult
    # answering the assistant message right before it, strict alternation.
    assert validate_conversation(trimmed.payload) == ()
    before, after = history_of(conversion), history_of(trimmed)
    if trimmed is conversion:
        return
    # What stays is the original in order, with one marker pair in place of whole rounds.
    kept = [entry for entry in after if not _is_marker(entry)]
    assert len(after) - len(kept) == 2
    start = next(position for position, entry in enumerate(after) if _is_marker(entry))
    assert after[:start] == before[:start]  # the system context pair and the first user message
    assert kept[start:] == before[len(before) - len(kept) + start :]  # the newest rounds, untouched
    assert (len(before) - len(kept)) % 2 == 0  # whole rounds: an assistant turn with the user turn answering it
    assert after[-1] == before[-1]  # the turn the current message answers
    assert (
        trimmed.payload["conversationState"]["currentMessage"]
        is conversion.payload["conversationState"]["currentMessage"]
    )


def _is_marker(entry: dict) -> bool:
    return entry.get("assistantResponseMessage", {}).get("content") == TRIM_ACKNOWLEDGEMENT or entry.get(
        "userInputMessage", {}
    ).get("content", "").startswith("[q2api left out ")
