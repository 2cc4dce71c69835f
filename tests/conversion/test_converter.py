"""Claude request → Amazon Q conversationState: merging, tool results, framing, system, thinking."""

from __future__ import annotations

import pytest

from q2api.conversion.order_guard import validate_conversation
from q2api.conversion.text import CANCELLED_TOOL_RESULT, EMPTY_TOOL_RESULT, PREFILL_CONTINUATION, TOOL_RESULTS_ONLY
from tests.support.converter_helpers import (
    PNG,
    all_text,
    all_tool_results,
    assistant,
    assistant_messages,
    convert,
    current,
    history,
    image,
    kinds,
    roles,
    state,
    system,
    table_options,
    tagged,
    text,
    tool_result,
    tool_results_of,
    tool_use,
    user,
)


def valid(conversion):
    assert validate_conversation(conversion.payload) == ()
    return conversion


# ---------------------------------------------------------------- the four content-merge cases

MERGE_CASES = {
    "str+str": ("first", "second", 0),
    "list+str": ([text("first"), image()], "second", 1),
    "str+list": ("first", [text("second"), image()], 1),
    "list+list": ([text("first"), image()], [image(), text("second")], 2),
}


@pytest.mark.parametrize("case", MERGE_CASES)
def test_consecutive_user_contents_merge(case):
    first, second, image_count = MERGE_CASES[case]
    conversion = valid(convert([user(first), user(second)]))
    message = current(conversion)
    assert history(conversion) == []
    assert message["content"] == "first\n\nsecond"
    assert len(message.get("images", [])) == image_count
    assert "merged_user_turn" in kinds(conversion)


@pytest.mark.parametrize("case", MERGE_CASES)
def test_merge_cases_in_history_keep_every_tool_result(case):
    first, second, _ = MERGE_CASES[case]
    conversion = valid(
        convert(
            [
                user("go"),
                assistant([tool_use("t1")]),
                user([tool_result("t1", "out-1")]),
                user(first),
                user(second),
                assistant("done"),
                user("thanks"),
            ]
        )
    )
    merged = history(conversion)[2]["userInputMessage"]
    assert [result["toolUseId"] for result in tool_results_of(merged)] == ["t1"]
    assert "first" in merged["content"] and "second" in merged["content"]


# ---------------------------------------------------------------- the three tool-loop scenarios


def test_one_tool_round():
    conversion = valid(
        convert([user("list files"), assistant([text("sure"), tool_use("t1")]), user([tool_result("t1", "a.txt")])])
    )
    assert roles(conversion) == ["user", "assistant"]
    assert history(conversion)[1]["assistantResponseMessage"]["toolUses"][0]["toolUseId"] == "t1"
    results = tool_results_of(current(conversion))
    assert results == [{"toolUseId": "t1", "content": [{"text": "a.txt"}], "status": "success"}]
    assert current(conversion)["content"] == TOOL_RESULTS_ONLY


def test_several_tool_rounds_keep_every_result():
    messages = [user("investigate")]
    for round_number in range(1, 4):
        messages.append(
            assistant([tool_use(f"t{round_number}a"), tool_use(f"t{round_number}b", "Read", {"file_path": "/x"})])
        )
        messages.append(
            user(
                [
                    tool_result(f"t{round_number}a", f"out {round_number}a"),
                    tool_result(f"t{round_number}b", f"out {round_number}b"),
                ]
            )
        )
    conversion = valid(convert(messages))
    assert roles(conversion) == ["user", "assistant"] * 3
    ids = [result["toolUseId"] for result in all_tool_results(conversion)]
    assert ids == ["t1a", "t1b", "t2a", "t2b", "t3a", "t3b"]
    for round_number in range(1, 4):
        assert f"out {round_number}a" in all_text(conversion)


def test_tool_result_turn_followed_by_another_user_turn():
    """The infinite-loop bug: results then a follow-up question before the assistant answers."""
    conversion = valid(
        convert(
            [
                user("check index.html"),
                assistant(
                    [tool_use("t1", "Bash", {"command": "git diff"}), tool_use("t2", "Bash", {"command": "git status"})]
                ),
                user([tool_result("t1", "diff output")]),
                user([tool_result("t2", "status output")]),
                user("did the commit succeed?"),
            ]
        )
    )
    message = current(conversion)
    assert [result["toolUseId"] for result in tool_results_of(message)] == ["t1", "t2"]
    assert message["content"] == "did the commit succeed?"
    assert kinds(conversion).count("merged_user_turn") == 2


# ---------------------------------------------------------------- tool results


def test_duplicate_tool_result_merges_and_error_wins():
    conversion = valid(
        convert(
            [
                user("go"),
                assistant([tool_use("t1")]),
                user([tool_result("t1", "part one")]),
                user([tool_result("t1", [text("part two")], is_error=True)]),
            ]
        )
    )
    [result] = tool_results_of(current(conversion))
    assert result["content"] == [{"text": "part one"}, {"text": "part two"}]
    assert result["status"] == "error"
    assert "duplicate_tool_result_merged" in kinds(conversion)


def test_tool_results_follow_tool_use_order():
    conversion = valid(
        convert(
            [
                user("go"),
                assistant([tool_use("a"), tool_use("b"), tool_use("c")]),
                user([tool_result("c"), tool_result("a"), tool_result("b")]),
            ]
        )
    )
    assert [result["toolUseId"] for result in tool_results_of(current(conversion))] == ["a", "b", "c"]
    assert "tool_results_reordered" in kinds(conversion)


def test_tool_result_content_forms():
    conversion = valid(
        convert(
            [
                user("go"),
                assistant([tool_use(f"t{n}") for n in range(6)]),
                user(
                    [
                        tool_result("t0", "plain string"),
                        tool_result("t1", [text("block one"), text("block two")]),
                        tool_result("t2", [text("see image"), image()]),
                        tool_result(
                            "t3",
                            [
                                {
                                    "type": "document",
                                    "title": "notes",
                                    "source": {"type": "text", "media_type": "text/plain", "data": "doc body"},
                                }
                            ],
                        ),
                        tool_result("t4", []),
                        tool_result("t5", "failed", is_error=True),
                    ]
                ),
            ]
        )
    )
    message = current(conversion)
    results = {result["toolUseId"]: result for result in tool_results_of(message)}
    assert results["t0"]["content"] == [{"text": "plain string"}]
    assert results["t1"]["content"] == [{"text": "block one"}, {"text": "block two"}]
    assert results["t2"]["content"][0] == {"text": "see image"}
    assert "attached to this message" in results["t2"]["content"][1]["text"]
    assert message["images"] == [{"format": "png", "source": {"bytes": PNG}}]
    assert "doc body" in results["t3"]["content"][0]["text"] and "notes" in results["t3"]["content"][0]["text"]
    assert results["t4"]["content"] == [{"text": EMPTY_TOOL_RESULT}]
    assert results["t5"]["status"] == "error" and results["t0"]["status"] == "success"
    assert "empty_tool_result" in kinds(conversion)


def test_orphan_tool_result_travels_as_labelled_text():
    conversion = valid(
        convert(
            [
                user("go"),
                assistant([tool_use("t1")]),
                user([tool_result("t1", "real"), tool_result("compacted", "lost output", is_error=True), text("next")]),
            ]
        )
    )
    message = current(conversion)
    assert [result["toolUseId"] for result in tool_results_of(message)] == ["t1"]
    assert "compacted" in message["content"] and "lost output" in message["content"] and "error" in message["content"]
    orphan = next(finding for finding in conversion.report if finding.kind == "orphan_tool_result")
    assert (orphan.message_index, orphan.tool_use_id) == (2, "compacted")


def test_tool_result_in_the_first_user_turn_is_an_orphan():
    conversion = valid(
        convert(
            [user([tool_result("old", "earlier output"), text("continue the work")]), assistant("ok"), user("next")]
        )
    )
    first = history(conversion)[0]["userInputMessage"]
    assert "userInputMessageContext" not in first
    assert "earlier output" in first["content"]


def test_unanswered_tool_use_gets_a_cancelled_result():
    """The user interrupted: a tool_use whose result never comes."""
    conversion = valid(
        convert(
            [
                user("go"),
                assistant([tool_use("t1"), tool_use("t2")]),
                user([tool_result("t2", "done")]),
                assistant("ok"),
                user("stop"),
            ]
        )
    )
    answered = tool_results_of(history(conversion)[2]["userInputMessage"])
    assert answered[0] == {"toolUseId": "t1", "content": [{"text": CANCELLED_TOOL_RESULT}], "status": "error"}
    assert answered[1]["toolUseId"] == "t2"
    cancelled = next(finding for finding in conversion.report if finding.kind == "cancelled_tool_result")
    assert (cancelled.message_index, cancelled.tool_use_id) == (1, "t1")


def test_interrupted_current_turn_keeps_the_user_text():
    conversion = valid(convert([user("go"), assistant([tool_use("t1")]), user("never mind, do something else")]))
    message = current(conversion)
    assert message["content"] == "never mind, do something else"
    assert tool_results_of(message)[0]["status"] == "error"


def test_invalid_tool_use_ids_are_renamed_on_both_sides():
    conversion = valid(convert([user("go"), assistant([tool_use("call.1:x")]), user([tool_result("call.1:x", "out")])]))
    [tool] = history(conversion)[1]["assistantResponseMessage"]["toolUses"]
    assert tool["toolUseId"] != "call.1:x"
    assert tool_results_of(current(conversion))[0]["toolUseId"] == tool["toolUseId"]
    assert "tool_use_id_renamed" in kinds(conversion)


def test_duplicate_tool_use_id_in_one_turn_keeps_both_calls_under_distinct_ids():
    # Issue 23: the second call used to be dropped with its input; now it gets a fresh id (and,
    # having no result of its own here, the cancelled result). More in test_wire_fidelity.py.
    conversion = valid(convert([user("go"), assistant([tool_use("t1"), tool_use("t1")]), user([tool_result("t1")])]))
    uses = history(conversion)[1]["assistantResponseMessage"]["toolUses"]
    assert len(uses) == 2 and len({use["toolUseId"] for use in uses}) == 2
    assert "duplicate_tool_use_id" in kinds(conversion)


def test_tool_input_nulls_and_empty_keys_are_removed():
    conversion = valid(
        convert(
            [
                user("go"),
                assistant(
                    [
                        tool_use(
                            "t1", "Bash", {"command": "ls", "timeout": None, "": 1, "opts": {"a": None, "b": [1, None]}}
                        )
                    ]
                ),
                user([tool_result("t1")]),
            ]
        )
    )
    [tool] = history(conversion)[1]["assistantResponseMessage"]["toolUses"]
    assert tool["input"] == {"command": "ls", "opts": {"b": [1]}}
    assert "tool_input_repaired" in kinds(conversion)


def test_a_string_mentioning_null_is_kept_intact():
    conversion = valid(
        convert(
            [user("go"), assistant([tool_use("t1", "Bash", {"command": 'echo ":null"'})]), user([tool_result("t1")])]
        )
    )
    assert history(conversion)[1]["assistantResponseMessage"]["toolUses"][0]["input"] == {"command": 'echo ":null"'}
    assert "tool_input_repaired" not in kinds(conversion)


# ---------------------------------------------------------------- framing


def test_consecutive_assistant_turns_merge():
    conversion = valid(
        convert(
            [
                user("go"),
                assistant([text("one"), tool_use("t1")]),
                assistant([text("two"), tool_use("t2")]),
                user([tool_result("t1"), tool_result("t2")]),
            ]
        )
    )
    [message] = list(assistant_messages(conversion))
    assert message["content"] == "one\n\ntwo"
    assert [tool["toolUseId"] for tool in message["toolUses"]] == ["t1", "t2"]
    assert "merged_assistant_turn" in kinds(conversion)


def test_history_starting_with_an_assistant_turn_gets_a_user_turn_first():
    conversion = valid(convert([assistant("I am ready"), user("good")]))
    assert roles(conversion) == ["user", "assistant"]
    assert "leading_assistant_turn" in kinds(conversion)


def test_prefill_stays_in_history_and_never_errors():
    conversion = valid(convert([user("write a haiku"), assistant("Autumn moon")]))
    assert history(conversion)[-1]["assistantResponseMessage"]["content"] == "Autumn moon"
    assert current(conversion)["content"] == PREFILL_CONTINUATION
    assert "prefill" in kinds(conversion)


def test_prefill_with_a_tool_use_is_answered():
    conversion = valid(convert([user("go"), assistant([tool_use("t1")])]))
    assert tool_results_of(current(conversion))[0]["status"] == "error"


def test_assistant_only_conversation():
    conversion = valid(convert([assistant("hello")]))
    assert roles(conversion) == ["user", "assistant"]


def test_output_shape():
    conversion = valid(
        convert([user("hi"), assistant("hello"), user("bye")], options=table_options(conversation_id="abc"))
    )
    conversation_state = state(conversion)
    assert conversation_state["conversationId"] == "abc"
    assert conversation_state["chatTriggerType"] == "MANUAL"
    assert history(conversion)[0]["userInputMessage"] == {"content": "hi", "origin": "AI_EDITOR"}
    assert current(conversion) == {"content": "bye", "origin": "AI_EDITOR", "modelId": "claude-sonnet-4.5"}


# ---------------------------------------------------------------- system


def test_system_prompt_becomes_a_stable_first_pair():
    system_prompt = [
        {"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Be brief."},
    ]
    earlier = valid(convert([user("one"), assistant("two"), user("three")], system=system_prompt))
    later = valid(
        convert([user("one"), assistant("two"), user("three"), assistant("four"), user("five")], system=system_prompt)
    )
    first = history(earlier)[0]["userInputMessage"]["content"]
    assert "You are helpful." in first and "Be brief." in first
    assert roles(earlier) == ["user", "assistant", "user", "assistant"]
    assert history(later)[: len(history(earlier))] == history(earlier)
    assert "You are helpful." not in current(earlier)["content"]
    assert "You are helpful." not in current(later)["content"]


def test_string_system_prompt():
    conversion = valid(convert([user("hi")], system="Answer in French."))
    assert "Answer in French." in history(conversion)[0]["userInputMessage"]["content"]


def test_system_turns_become_context_in_place():
    conversion = valid(
        convert(
            [
                system(""),
                user("first question"),
                assistant([tool_use("t1")]),
                system([text("<env>cwd: /repo</env>")]),
                user([tool_result("t1", "out")]),
                system(None),
            ]
        )
    )
    message = current(conversion)
    assert "<env>cwd: /repo</env>" in message["content"]
    assert [result["toolUseId"] for result in tool_results_of(message)] == ["t1"]
    assert kinds(conversion).count("empty_system_turn_dropped") == 2
    assert "system_turn_as_context" in kinds(conversion)


def test_system_turn_only_request():
    conversion = valid(convert([system("just context")]))
    assert "just context" in current(conversion)["content"]


# ---------------------------------------------------------------- images


def test_image_conversion_and_jpg_alias():
    conversion = valid(convert([user([image("AAAA", "image/jpg"), text("what is this?")])]))
    assert current(conversion)["images"] == [{"format": "jpeg", "source": {"bytes": "AAAA"}}]


def test_at_most_ten_images_per_message_keeping_the_most_recent():
    conversion = valid(
        convert(
            [
                user([image(tagged(f"img{n}")) for n in range(8)]),
                user([image(tagged(f"img{n}")) for n in range(8, 13)]),
            ]
        )
    )
    kept = [entry["source"]["bytes"] for entry in current(conversion)["images"]]
    assert kept == [tagged(f"img{n}") for n in range(3, 13)]
    dropped = [finding for finding in conversion.report if finding.kind == "image_dropped"]
    assert [finding.message_index for finding in dropped] == [0, 0, 0]


def test_images_stay_with_their_history_message():
    conversion = valid(convert([user([text("look"), image(tagged("first"))]), assistant("a cat"), user("thanks")]))
    assert history(conversion)[0]["userInputMessage"]["images"][0]["source"]["bytes"] == tagged("first")
    assert "images" not in current(conversion)


# ---------------------------------------------------------------- thinking


def test_thinking_enabled_adds_the_hint_with_the_budget():
    conversion = valid(convert([user("think")], thinking={"type": "enabled", "budget_tokens": 4096}))
    assert current(conversion)["content"] == (
        "<thinking_mode>enabled</thinking_mode><max_thinking_length>4096</max_thinking_length>\nthink"
    )


def test_adaptive_thinking_uses_the_default_budget_and_disabled_adds_nothing():
    adaptive = convert([user("think")], thinking={"type": "adaptive"})
    assert "<max_thinking_length>20000</max_thinking_length>" in current(adaptive)["content"]
    disabled = convert([user("think")], thinking={"type": "disabled"})
    assert current(disabled)["content"] == "think"


def test_thinking_hint_is_never_duplicated():
    hint = "<thinking_mode>enabled</thinking_mode><max_thinking_length>10</max_thinking_length>"
    conversion = valid(convert([user(hint), user("more")], thinking={"type": "enabled", "budget_tokens": 4096}))
    assert current(conversion)["content"].count("<thinking_mode>") == 1
    assert "thinking_hint" not in kinds(conversion)  # the report does not claim a hint was added


def test_history_thinking_becomes_recognisable_text():
    conversion = valid(
        convert(
            [
                user("q"),
                assistant(
                    [
                        {"type": "thinking", "thinking": "let me see", "signature": "sig"},
                        {"type": "redacted_thinking", "data": "xx"},
                        text("answer"),
                    ]
                ),
                user("next"),
            ]
        )
    )
    assert history(conversion)[1]["assistantResponseMessage"]["content"] == "<thinking>let me see</thinking>\n\nanswer"
    assert "redacted_thinking_dropped" in kinds(conversion)


# ---------------------------------------------------------------- documents and server artefacts


def test_base64_text_document_is_decoded():
    conversion = valid(
        convert(
            [
                user(
                    [
                        {
                            "type": "document",
                            "source": {"type": "base64", "media_type": "text/plain", "data": "aGVsbG8gZG9j"},
                        }
                    ]
                )
            ]
        )
    )
    assert "hello doc" in current(conversion)["content"]


def test_server_tool_artefacts_are_dropped_and_reported():
    # Web search blocks are carried as context now (issue 21); other server artefacts are still dropped.
    conversion = valid(
        convert(
            [
                user("run"),
                assistant(
                    [
                        {"type": "server_tool_use", "id": "srv1", "name": "code_execution", "input": {"code": "1"}},
                        {"type": "code_execution_tool_result", "tool_use_id": "srv1", "content": {}},
                        text("found it"),
                    ]
                ),
                user("thanks"),
            ]
        )
    )
    assert history(conversion)[1]["assistantResponseMessage"] == {"content": "found it"}
    assert kinds(conversion).count("server_block_dropped") == 2


def test_earlier_web_search_blocks_travel_as_context_text():
    result = {
        "type": "web_search_result",
        "title": "Python 3.14",
        "url": "https://python.test/314",
        "page_age": "May 1, 2026",
    }
    conversion = valid(
        convert(
            [
                user("search"),
                assistant(
                    [
                        {"type": "server_tool_use", "id": "srv1", "name": "web_search", "input": {"query": "py 3.14"}},
                        {"type": "web_search_tool_result", "tool_use_id": "srv1", "content": [result]},
                        {"type": "server_tool_use", "id": "srv2", "name": "web_search", "input": {"query": "nothing"}},
                        {"type": "web_search_tool_result", "tool_use_id": "srv2", "content": []},
                        {"type": "server_tool_use", "id": "srv3", "name": "web_search", "input": {"query": "down"}},
                        {
                            "type": "web_search_tool_result",
                            "tool_use_id": "srv3",
                            "content": {"type": "web_search_tool_result_error", "error_code": "unavailable"},
                        },
                        text("found it"),
                    ]
                ),
                user("thanks"),
            ]
        )
    )
    content = history(conversion)[1]["assistantResponseMessage"]["content"]
    assert "[I searched the web for: py 3.14]" in content
    assert "- Python 3.14 <https://python.test/314> (May 1, 2026)" in content
    assert "[The web search found nothing.]" in content
    assert "[The web search failed: unavailable]" in content
    assert content.endswith("found it")
    assert kinds(conversion).count("server_block_as_text") == 6
    assert "server_block_dropped" not in kinds(conversion)


def test_search_result_block_becomes_text():
    conversion = valid(
        convert(
            [
                user(
                    [
                        {
                            "type": "search_result",
                            "source": "https://example.com",
                            "title": "Example",
                            "content": [text("result body")],
                        }
                    ]
                )
            ]
        )
    )
    assert "result body" in current(conversion)["content"] and "Example" in current(conversion)["content"]


# ---------------------------------------------------------------- conversation id


def _parsed(metadata):
    import orjson

    from q2api.anthropic.types import parse_messages_request

    return parse_messages_request(
        orjson.dumps({"model": "m", "max_tokens": 1, "messages": [user("x")], "metadata": metadata})
    )


def test_session_conversation_id_is_stable_per_session():
    from q2api.conversion.claude_converter import session_conversation_id

    json_form = '{"device_id": "d", "account_uuid": "", "session_id": "5f1c6c1e-0000-4000-8000-000000000000"}'
    first = session_conversation_id(_parsed({"user_id": json_form}))
    assert first == session_conversation_id(_parsed({"user_id": json_form}))
    assert first is not None and 1 <= len(first) <= 128
    other = session_conversation_id(_parsed({"user_id": json_form.replace("5f1c", "aaaa")}))
    assert other != first
    legacy = "user_abc_account__session_5f1c6c1e-0000-4000-8000-000000000000"
    assert session_conversation_id(_parsed({"user_id": legacy})) == first
    for metadata in ({}, {"user_id": None}, {"user_id": "{bad json"}, {"user_id": "plain"}, {"user_id": "[]"}):
        assert session_conversation_id(_parsed(metadata)) is None
