"""What `q2api serve` really writes to stderr about a conversion: the debug block as whole lines,
exactly what the code prints; the `messages normalized:` line with its fields; the same fields as
data in the JSON format. A separate process, read line by line, not a capture inside the test."""

from __future__ import annotations

import json
import re

import anthropic
import orjson

from q2api.anthropic.types import parse_messages_request
from q2api.conversion.claude_converter import ConversionOptions, convert_claude_request
from q2api.conversion.debug_summary import SUMMARY_FOOTER, SUMMARY_HEADER, conversion_summary
from q2api.models.table import resolve_model
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.converter_helpers import assistant, request_body, tool_result, tool_use
from tests.support.gateway_harness import CLIENT_KEY, MODEL, user
from tests.support.serve_process import serve

# A conversation with repairs: a merged user turn, an unanswered tool use, an orphan result.
MESSAGES = [
    user("check the build"),
    assistant([tool_use("toolu_a", "Bash", {"command": "make"}), tool_use("toolu_b", "Bash", {"command": "ls"})]),
    user([tool_result("toolu_a", "build ok")]),
    user([tool_result("toolu_gone", "old output")]),
]


def send(base_url: str) -> None:
    client = anthropic.Anthropic(base_url=base_url, api_key=CLIENT_KEY, max_retries=0, timeout=30.0)
    client.messages.create(model=MODEL, max_tokens=50, messages=MESSAGES)


def expected_block() -> list[str]:
    request = parse_messages_request(orjson.dumps(request_body(MESSAGES, model=MODEL)))
    return conversion_summary(
        len(MESSAGES),
        convert_claude_request(request, ConversionOptions(conversation_id="c", model=resolve_model(request.model))),
    ).split("\n")


def test_the_text_log_holds_the_debug_block_as_whole_lines_and_the_normalized_line(tmp_path):
    with (
        SimulatedUpstream.run_in_thread() as upstream,
        serve(tmp_path, upstream.env(), client_key=CLIENT_KEY, DEBUG_MESSAGE_CONVERSION="true") as server,
    ):
        send(server.base_url)
        server.wait_for(lambda line: "POST /v1/messages " in line)
    lines = server.lines
    start = lines.index(SUMMARY_HEADER)
    block = expected_block()
    assert lines[start : start + len(block)] == block  # header to the last finding, every line whole and exact
    assert lines[start + block.index(SUMMARY_FOOTER)] == SUMMARY_FOOTER
    assert any(line.startswith("[warning] cancelled_tool_result") for line in block)
    # The logger's prefix and the fields stand on their own line, just above the block.
    assert re.fullmatch(r"\d{4}-\d\d-\d\d [\d:.]+ \| INFO +\| request_id=req_[0-9a-f]+", lines[start - 1])
    [normalized] = [line for line in lines if "| messages normalized:" in line]
    assert re.search(
        r"\| INFO +\| messages normalized: request_id=req_\w+ before=4 after=3 "
        r"merged_user_turn=1 orphan_tool_result=1 cancelled_tool_result=1$",
        normalized,
    )
    warnings = [line.split("| WARNING | ", 1)[1] for line in lines if "| WARNING | conversion finding:" in line]
    assert [line.split()[3] for line in warnings] == ["orphan_tool_result", "cancelled_tool_result"]


def test_the_json_log_carries_the_normalized_fields_as_data(tmp_path):
    with (
        SimulatedUpstream.run_in_thread() as upstream,
        serve(tmp_path, upstream.env(), client_key=CLIENT_KEY, log_format="json") as server,
    ):
        send(server.base_url)
        server.wait_for(lambda line: "POST /v1/messages" in line)
    records = [json.loads(line) for line in server.lines if line.strip()]
    [record] = [record for record in records if record["message"] == "messages normalized:"]
    assert record["level"] == "INFO"
    assert record["request_id"].startswith("req_")
    fields = {key: value for key, value in record.items() if key not in {"time", "level", "message", "logger"}}
    assert {key: value for key, value in fields.items() if key != "request_id"} == {
        "before": 4,
        "after": 3,
        "merged_user_turn": 1,
        "orphan_tool_result": 1,
        "cancelled_tool_result": 1,
    }
