"""TROUBLESHOOTING_INFINITE_LOOP.md shows what the code really prints: its example request, run
through the loop guard and the converter, gives exactly the quoted summary, log lines and 400, the
running gateway answers it exactly as quoted, and its capture replays exactly as quoted."""

from __future__ import annotations

import re
from pathlib import Path

from q2api.anthropic.types import parse_messages_request
from q2api.conversion.claude_converter import ConversionOptions, convert_claude_request
from q2api.conversion.debug_summary import SUMMARY_HEADER, conversion_summary
from q2api.conversion.loop_guard import LoopMode, LoopPolicy, detect_tool_loops, loop_refusal
from q2api.conversion.normalization import normalization_record
from q2api.conversion.report import FindingKind
from q2api.models.table import resolve_model
from q2api.server.lifecycle.conversion_log import LOOP_LINE_PREFIX
from q2api.settings import ENV_VARIABLES
from q2api.testing import scripts
from tests.support.captures import run_cli, wait_for_capture
from tests.support.gateway_harness import capture_logs, open_gateway

DOC = (Path(__file__).resolve().parent.parent / "TROUBLESHOOTING_INFINITE_LOOP.md").read_text()
LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+ \| (?P<level>[A-Z]+) *\| ")
REQUEST_ID = re.compile(r" ?request_id=req_[0-9a-f]+")


def example(name: str) -> str:
    """The fenced block right after `<!-- example:NAME -->`."""
    match = re.search(rf"<!-- example:{name} -->\n```\w*\n(.*?)\n```", DOC, re.DOTALL)
    assert match, name
    return match.group(1)


def log_messages(block: str) -> list[tuple[str, str]]:
    """(level, message without the request id) of each prefixed line of a quoted log."""
    lines = []
    for line in block.splitlines():
        match = LOG_PREFIX.match(line)
        if match:
            lines.append((match["level"], REQUEST_ID.sub("", line[match.end() :])))
    return lines


REQUEST = parse_messages_request(example("request").encode())
LOOPS = detect_tool_loops(REQUEST, LoopPolicy())
CONVERSION = convert_claude_request(
    REQUEST, ConversionOptions(conversation_id="doc", model=resolve_model(REQUEST.model))
)


def test_the_example_summary_is_what_the_code_prints_for_the_example_request():
    log = example("log").splitlines()
    start = log.index(SUMMARY_HEADER)
    summary = conversion_summary(len(REQUEST.messages), CONVERSION, LOOPS).splitlines()
    assert log[start : start + len(summary)] == summary
    assert LOG_PREFIX.match(log[start + len(summary)])  # nothing of the block left out


def test_the_quoted_log_lines_are_what_the_gateway_writes():
    messages = log_messages(example("log"))
    [finding] = LOOPS
    assert ("WARNING", f"{LOOP_LINE_PREFIX} {finding.line()}") in messages
    record = normalization_record(len(REQUEST.messages), CONVERSION)
    assert record is not None
    assert ("INFO", record.line()) in messages
    block_messages = log_messages(example("block-log"))
    assert block_messages[0] == ("WARNING", f"{LOOP_LINE_PREFIX} {finding.line()}")
    assert " status=400 " in block_messages[1][1]


def test_the_quoted_400_is_what_block_mode_answers():
    refusal = loop_refusal(detect_tool_loops(REQUEST, LoopPolicy(LoopMode.BLOCK)), LoopPolicy(LoopMode.BLOCK))
    assert refusal is not None and refusal.message == example("refusal")


def test_the_doc_names_the_loop_settings_that_exist():
    for variable in ("Q2API_LOOP_MODE", "Q2API_LOOP_THRESHOLD", "Q2API_LOOP_STORM_THRESHOLD"):
        assert variable in ENV_VARIABLES and f"`{variable}`" in DOC


async def test_the_running_gateway_answers_the_example_as_the_doc_says(tmp_path):
    async with open_gateway(tmp_path, Q2API_LOOP_MODE="block") as gw, gw.http() as http:
        with capture_logs() as logs:
            response = await http.post("/v1/messages", content=example("request").encode())
        assert gw.sim.requests == []
    assert response.status_code == 400
    assert response.json()["error"] == {"type": "invalid_request_error", "message": example("refusal")}
    quoted = log_messages(example("block-log"))
    written = [(line.level, line.message) for line in logs.for_request(response.json()["request_id"])]
    assert written[0] == quoted[0]


def test_the_doc_names_every_kind_of_finding_a_user_can_see():
    for kind in FindingKind:
        assert f"`{kind}`" in DOC, kind


def test_the_quoted_request_line_names_the_capture_of_the_request():
    for name in ("log", "block-log"):
        line = next(line for line in example(name).splitlines() if " | INFO    | POST /v1/messages" in line)
        request_id = re.search(r"request_id=(req_[0-9a-f]+)", line)[1]
        assert re.search(rf" capture=\d{{8}}T\d{{9}}Z-{request_id}$", line), line


async def test_the_example_request_is_captured_and_replays_exactly_as_quoted(tmp_path):
    captures = tmp_path / "captures"
    async with open_gateway(tmp_path, Q2API_CAPTURE_DIR=str(captures)) as gw, gw.http() as http:
        gw.sim.enqueue(scripts.text_reply("index.html is committed."))
        with capture_logs() as logs:
            response = await http.post("/v1/messages", content=example("request").encode())
        assert response.status_code == 200
        [line] = logs.request_lines()
        capture_id = line.extra["capture"]
        await wait_for_capture(captures, capture_id)
    quoted = example("replay").splitlines()
    quoted_id = quoted[0].split()[3]
    status, out, _ = await run_cli(
        "replay", str(captures / f"{capture_id}.json"), "--convert-only", "--diff", cwd=tmp_path
    )
    assert status == 0
    assert quoted[0] == f"$ q2api replay {quoted_id} --convert-only --diff"
    assert out.splitlines() == [text.replace(quoted_id, capture_id) for text in quoted[1:]]


def test_the_doc_names_the_function_that_keeps_every_tool_result_of_merged_user_messages():
    from q2api.conversion import claude_converter

    assert "`claude_converter.merge_user_messages`" in DOC
    assert (
        claude_converter.merge_user_messages.__doc__
        and "every tool_result" in claude_converter.merge_user_messages.__doc__
    )
    assert not (Path(claude_converter.__file__).parent / "converter.py").exists()  # renamed, not a second module
