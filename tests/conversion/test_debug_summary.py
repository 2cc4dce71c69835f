"""DEBUG_MESSAGE_CONVERSION summary and redacted dumps."""

from __future__ import annotations

import orjson

from q2api.conversion.debug_summary import REDACTED, conversion_summary, redacted_claude_request, redacted_payload
from q2api.conversion.report import Finding, FindingKind
from tests.support.claude_code_request import claude_code_request
from tests.support.converter_helpers import PNG, assistant, convert, image, text, tool_result, tool_use, user


def seven_messages():
    return [
        user("check index.html"),
        assistant([tool_use("t1")]),
        user([tool_result("t1", "diff")]),
        assistant([tool_use("t2")]),
        user([tool_result("t2", "status")]),
        assistant("committed"),
        user("thanks"),
    ]


def test_summary_has_the_exact_interface_shape():
    messages = seven_messages()
    conversion = convert(messages)
    summary = conversion_summary(len(messages), conversion)
    head, _, _ = summary.partition("================================\n")
    assert head + "================================" == "\n".join(
        [
            "=== Message Conversion Debug ===",
            "Input: 7 Claude messages",
            "Output: 6 history messages + 1 current message",
            "  History[0]: USER (toolResults: False)",
            "  History[1]: ASSISTANT (toolUses: True)",
            "  History[2]: USER (toolResults: True)",
            "  History[3]: ASSISTANT (toolUses: True)",
            "  History[4]: USER (toolResults: True)",
            "  History[5]: ASSISTANT (toolUses: False)",
            "  Current: USER (toolResults: 0)",  # issue 23: the current message is described too
            "================================",
        ]
    )


def test_findings_are_listed_under_the_summary_one_line_each():
    conversion = convert([user("a"), user("b"), assistant([tool_use("t1")]), user("c")])
    extra = Finding(FindingKind.TOOL_LOOP_CYCLE, 2, detail="the same tool round (Bash {}) 3 times in a row")
    lines = conversion_summary(4, conversion, [extra]).splitlines()
    footer = lines.index("================================")
    report_lines = lines[footer + 1 :]
    assert len(report_lines) == len(conversion.report) + 1
    assert report_lines[0] == "[info] merged_user_turn message=1: merged into the user turn of message 0"
    assert any(line.startswith("[warning] cancelled_tool_result message=2 tool=t1") for line in report_lines)
    assert report_lines[-1] == "[warning] tool_loop_cycle message=2: the same tool round (Bash {}) 3 times in a row"


def test_summary_never_holds_image_bytes():
    # Twelve images: two are dropped, and the report lines about them must not carry their bytes.
    conversion = convert([user([*[image(PNG)] * 12, text("see")])])
    summary = conversion_summary(1, conversion)
    assert "image_dropped" in summary
    assert PNG not in summary


def test_redacted_payload_replaces_image_bytes_and_keeps_texts():
    conversion = convert([user([image(PNG), text("a long text " * 200)]), assistant("ok"), user([image(PNG)])])
    payload = dict(conversion.payload, profileArn="arn:aws:codewhisperer:us-east-1:123456789012:profile/ABC")
    redacted = redacted_payload(payload)
    dumped = orjson.dumps(redacted).decode()
    assert PNG not in dumped and "123456789012" not in dumped
    assert f"<{len(PNG)} base64 characters>" in dumped
    assert redacted["profileArn"] == REDACTED
    assert "a long text " * 200 in dumped
    assert (
        conversion.payload["conversationState"]["currentMessage"]["userInputMessage"]["images"][0]["source"]["bytes"]
        == PNG
    )  # not mutated


def test_redacted_claude_request_hides_base64_data_and_secrets():
    body = claude_code_request(size_kb=20)
    body["messages"].append(
        user(
            [
                image(PNG),
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"},
                },
            ]
        )
    )
    body["metadata"]["access_token"] = "aoa-secret-token"
    dumped = orjson.dumps(redacted_claude_request(body)).decode()
    assert PNG not in dumped and "JVBERi0xLjQK" not in dumped and "aoa-secret-token" not in dumped
    assert "You are Claude Code" in dumped
    assert redacted_claude_request(body)["max_tokens"] == 128000


def test_a_finding_line_is_always_one_line():
    # Tool ids and details can hold the client's text; a line break must not start a new log line.
    finding = Finding(FindingKind.ORPHAN_TOOL_RESULT, 1, "toolu_x\nFAKE | ERROR | forged", "a\r\nb")
    assert finding.line() == "[warning] orphan_tool_result message=1 tool=toolu_x\\nFAKE | ERROR | forged: a\\r\\nb"
    assert "\n" not in finding.line()
