"""No client-supplied value can forge a line in the text log.

The gateway's own text sink (the one `q2api serve` writes to stderr) receives
requests whose path, model or tool ids carry newlines and other control
characters; every line it writes must still be one of the gateway's lines.
"""

from __future__ import annotations

import io
import re

import orjson
import pytest

from q2api.conversion.report import Finding, FindingKind
from q2api.log_text import one_line
from q2api.server.logging_setup import add_text_sink
from q2api.testing import scripts
from tests.support.gateway_harness import MODEL

# Every line the text sink writes starts with a timestamp and a level.
LINE_START = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \| [A-Z]+ +\| ")
FORGED = "FORGED | CRITICAL | pwned"


@pytest.fixture
def text_log():
    stream = io.StringIO()
    handler = add_text_sink(stream, "DEBUG")
    yield stream
    from loguru import logger

    logger.remove(handler)


def lines_of(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def assert_no_forged_line(stream: io.StringIO) -> None:
    lines = lines_of(stream)
    assert lines
    for line in lines:
        assert LINE_START.match(line), line
    assert not any(line.startswith("FORGED") for line in lines)


@pytest.mark.parametrize("path", ["/%0A" + FORGED.replace(" ", "%20"), "/v1/x%0D%0A" + FORGED.replace(" ", "%20")])
async def test_a_newline_in_the_path_cannot_forge_a_line(gw, text_log, path) -> None:
    async with gw.http() as http:
        response = await http.get(path)
    assert response.status_code == 404
    assert_no_forged_line(text_log)
    assert "\\n" + FORGED in text_log.getvalue()  # still readable, escaped


async def test_a_newline_in_the_model_cannot_forge_a_line(gw, text_log) -> None:
    gw.sim.enqueue(scripts.text_reply("ok"))
    body = {"model": f"{MODEL}\n{FORGED}", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
    async with gw.http() as http:
        response = await http.post("/v1/messages", content=orjson.dumps(body))
    assert response.status_code < 500
    assert_no_forged_line(text_log)


async def test_a_newline_in_a_tool_id_cannot_forge_a_line_in_the_debug_summary(tmp_path, text_log) -> None:
    from tests.support.gateway_harness import open_gateway

    messages = [
        {"role": "user", "content": "go"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"orphan\n{FORGED}", "content": "x"}]},
    ]
    async with open_gateway(tmp_path, DEBUG_MESSAGE_CONVERSION="true") as gw:
        gw.sim.enqueue(scripts.text_reply("ok"))
        async with gw.http() as http:
            response = await http.post(
                "/v1/messages", content=orjson.dumps({"model": MODEL, "max_tokens": 20, "messages": messages})
            )
    assert response.status_code == 200, response.text
    assert not any(line.startswith("FORGED") for line in lines_of(text_log))


def test_one_line_escapes_every_line_breaking_character() -> None:
    for char in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00\x1b\x7f":
        assert len(f"a{one_line(char)}b".splitlines()) == 1, repr(char)
        assert "\x1b" not in one_line(char)
    assert one_line("naïve 日本 text") == "naïve 日本 text"
    assert one_line("a\\x0ab") == "a\\\\x0ab"  # a typed escape stays distinguishable from a made one


def test_a_finding_line_is_one_line() -> None:
    finding = Finding(FindingKind.ORPHAN_TOOL_RESULT, 3, "toolu\nx", "name\r\nforged")
    assert len(finding.line().splitlines()) == 1
