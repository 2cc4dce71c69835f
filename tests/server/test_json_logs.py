"""`Q2API_LOG_FORMAT=json`: one flat JSON object per line, what log tools index at the top level."""

from __future__ import annotations

import datetime
import io
import json
from collections.abc import Iterator

import pytest
from loguru import logger

from q2api.server.logging_setup import JsonLineSink
from q2api.testing import scripts
from tests.support.gateway_harness import CLIENT_KEY, ask, find_secrets, open_gateway


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logger.add(JsonLineSink(stream), level="DEBUG", format="", backtrace=False, diagnose=False)
    yield stream
    logger.remove(handler)


def records(stream: io.StringIO) -> list[dict]:
    lines = stream.getvalue().splitlines()
    return [json.loads(line) for line in lines]


def test_bound_fields_sit_at_the_top_level_and_never_replace_the_base_keys(json_lines):
    logger.bind(request_id="req_1", status=429, message="client text", upstream_ms="12.5").warning("POST /v1/messages")
    (line,) = records(json_lines)
    assert line["level"] == "WARNING" and line["message"] == "POST /v1/messages"
    assert line["request_id"] == "req_1" and line["status"] == 429 and line["upstream_ms"] == "12.5"
    assert line["field_message"] == "client text"
    assert datetime.datetime.fromisoformat(line["time"]).tzinfo is not None  # ISO 8601 with its offset
    assert "record" not in line and "extra" not in line


def test_a_multi_line_message_and_a_traceback_stay_on_one_line(json_lines):
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logger.exception("=== Message Conversion Debug ===\nInput: 2 Claude messages")
    (line,) = records(json_lines)
    assert line["message"].splitlines() == ["=== Message Conversion Debug ===", "Input: 2 Claude messages"]
    assert line["exception"].startswith("Traceback") and "RuntimeError: boom" in line["exception"]


async def test_a_gateway_request_line_is_flat_with_its_request_id_and_status(tmp_path, json_lines):
    async with open_gateway(tmp_path) as gw:
        # The token taken at start-up (for the model catalogue) is refused: the request refreshes it.
        gw.sim.enqueue(scripts.bearer_invalid())
        await ask(gw.client, "json please")
    lines = records(json_lines)
    [request] = [line for line in lines if line["message"] == "POST /v1/messages"]
    assert request["request_id"].startswith("req_") and request["status"] == 200
    assert request["model"] == "claude-sonnet-5-5" and request["stop_reason"] == "end_turn"
    # Lines logged inside the request (the token refresh) carry its id too.
    assert any(line.get("request_id") == request["request_id"] for line in lines if line is not request)
    assert not find_secrets(json_lines.getvalue()) and CLIENT_KEY not in json_lines.getvalue()
