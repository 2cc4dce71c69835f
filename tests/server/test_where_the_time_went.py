"""Issue 23 through the running gateway: every upstream attempt counted with its host, where a
request's time went (log line and /metrics), the counters seed 001 §6.3 asked for, and the
switches that used to stay silent."""

from __future__ import annotations

import asyncio
import time

import anthropic
import httpx2
import pytest

from q2api.cli.env_check import unknown_variables
from q2api.testing import scripts
from q2api.testing.scripts import Pause
from tests.support.converter_helpers import assistant, tool_result, tool_use
from tests.support.gateway_harness import MODEL, Gateway, capture_logs, open_gateway, user
from tests.support.metrics_scrape import Scrape
from tests.support.tool_sessions import SEED_ROUND, session

SERVED_MODEL = "claude-sonnet-5.5"


async def scrape(gw: Gateway) -> Scrape:
    async with httpx2.AsyncClient(base_url=gw.base_url, timeout=10) as http:
        return Scrape((await http.get("/metrics")).text)


def host(gw: Gateway) -> str:
    return gw.sim.url.split("//")[1].rstrip("/")


# ------------------------------------------------------------------ every attempt, and its host


@pytest.mark.slow  # waits out the retries' back-off
async def test_a_request_that_failed_after_four_upstream_calls_logs_four_attempts_and_each_host(gw: Gateway):
    gw.sim.enqueue(*[scripts.server_error(500)] * 4)  # the first call and Q2API_MAX_RETRIES=3 retries
    with capture_logs() as logs, pytest.raises(anthropic.InternalServerError):
        await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[user("hi")])
    [line] = logs.request_lines()
    assert len(gw.sim.requests) == 4
    assert line.extra["upstream_attempts"] == 4  # it said 0 before
    assert line.extra["upstream_hosts"] == ",".join([host(gw)] * 4)
    assert line.extra["upstream_ms"] != "-"  # how long the upstream took to fail, retries included


async def test_the_refresh_and_repeat_after_a_rejected_token_counts_as_two_attempts(gw: Gateway):
    gw.sim.enqueue(scripts.bearer_invalid(), scripts.text_reply("fine"))
    with capture_logs() as logs:
        await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[user("hi")])
    [line] = logs.request_lines()
    assert line.extra["upstream_attempts"] == 2 and line.extra["status"] == 200


# ------------------------------------------------------------------ where the time went


async def test_the_log_line_says_where_the_time_went(gw: Gateway):
    # Headers after 0.2 s, then 0.3 s of silence before the first text: the upstream's share shows.
    gw.sim.enqueue(scripts.slow_headers(0.2, scripts.stream(Pause(0.3), scripts.text_events("hello"))))
    with capture_logs() as logs:
        stream = await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[user("hi")], stream=True)
        async for _ in stream:
            pass
    [line] = logs.request_lines()
    fields = line.extra
    prepare, headers, first = (
        float(fields[name]) for name in ("prepare_ms", "upstream_ms", "upstream_first_content_ms")
    )
    ttft, total = float(fields["ttft_ms"]), float(fields["total_ms"])
    assert headers >= 200 and first >= headers + 300  # the injected waits, measured where they happened
    assert prepare <= ttft <= total and first <= ttft


async def test_metrics_hold_histograms_of_the_gateways_and_the_upstreams_time(gw: Gateway):
    before = await scrape(gw)
    await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[user("hi")])
    after = await scrape(gw)
    for histogram, labels in (
        ("q2api_prepare_seconds_count", {"route": "/v1/messages"}),
        ("q2api_upstream_response_headers_seconds_count", {"model": SERVED_MODEL}),
        ("q2api_upstream_first_content_seconds_count", {"model": SERVED_MODEL}),
        ("q2api_request_duration_seconds_count", {"route": "/v1/messages"}),
    ):
        assert after.value(histogram, **labels) - before.value(histogram, **labels) == 1, histogram


# ------------------------------------------------------------------ the counters of seed 001 §6.3


async def test_metrics_count_normalisations_findings_loops_and_captures(tmp_path):
    async with open_gateway(tmp_path) as gw:
        before = await scrape(gw)
        gw.sim.enqueue(scripts.text_reply("merged"), scripts.text_reply("looped"))
        await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[user("a"), user("b")])
        await gw.client.messages.create(model=MODEL, max_tokens=50, messages=session([SEED_ROUND] * 4))
        # The capture is written, and counted, by a worker thread once the request is over.
        after, deadline = await scrape(gw), time.monotonic() + 10
        while after.value("q2api_captures_total", reason="tool_loop") == before.value(
            "q2api_captures_total", reason="tool_loop"
        ):
            assert time.monotonic() < deadline, "the loop's capture was never counted"
            await asyncio.sleep(0.02)
            after = await scrape(gw)

    def grew(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    assert grew("q2api_conversion_normalizations_total", kind="merged_user_turn") == 1
    assert grew("q2api_conversion_findings_total", kind="merged_user_turn", severity="info") == 1
    assert grew("q2api_conversion_findings_total", kind="tool_loop_cycle", severity="warning") == 1
    assert grew("q2api_tool_loops_total", kind="tool_loop_cycle", mode="warn") == 1
    assert grew("q2api_captures_total", reason="tool_loop") == 1


async def test_a_loop_blocked_is_counted_under_its_mode(tmp_path):
    async with open_gateway(tmp_path, Q2API_LOOP_MODE="block") as gw:
        before = await scrape(gw)
        with pytest.raises(anthropic.BadRequestError):
            await gw.client.messages.create(model=MODEL, max_tokens=50, messages=session([SEED_ROUND] * 4))
        after = await scrape(gw)
    labels = {"kind": "tool_loop_cycle", "mode": "block"}
    assert after.value("q2api_tool_loops_total", **labels) - before.value("q2api_tool_loops_total", **labels) == 1


# ------------------------------------------------------------------ the loop guard's way out, through the gateway


async def test_block_mode_lets_the_user_out_with_a_new_instruction_beside_the_tool_results(tmp_path):
    messages = session([SEED_ROUND] * 5)
    messages[-1] = user([*messages[-1]["content"], {"type": "text", "text": "It is committed. Stop and summarise."}])
    async with open_gateway(tmp_path, Q2API_LOOP_MODE="block") as gw:
        gw.sim.enqueue(scripts.text_reply("Summary: index.html is committed."))
        message = await gw.client.messages.create(model=MODEL, max_tokens=50, messages=messages)
    assert message.content[0].text == "Summary: index.html is committed."


# ------------------------------------------------------------------ silent switches


async def test_the_debug_summary_hidden_by_the_log_level_is_said_at_start_up(tmp_path):
    with capture_logs() as logs:
        async with open_gateway(tmp_path, DEBUG_MESSAGE_CONVERSION="true", Q2API_LOG_LEVEL="WARNING"):
            pass
    [warning] = [line for line in logs.lines if "DEBUG_MESSAGE_CONVERSION" in line.message]
    assert warning.level == "WARNING" and "Q2API_LOG_LEVEL=WARNING" in warning.message


async def test_no_such_warning_when_the_level_shows_the_summary(tmp_path):
    with capture_logs() as logs:
        async with open_gateway(tmp_path, DEBUG_MESSAGE_CONVERSION="true"):
            pass
    assert not [line for line in logs.lines if "DEBUG_MESSAGE_CONVERSION=true writes" in line.message]


@pytest.mark.parametrize("misspelt", ["DEBUG_MESSAGE_CONVERSON", "DEBUG_MESAGE_CONVERSION", "debug_message_conversion"])
def test_a_misspelt_debug_message_conversion_gets_a_did_you_mean(misspelt):
    [unknown] = unknown_variables({misspelt: "true", "PATH": "/bin", "DEBUG": "1", "HOME": "/root"}, env_file=None)
    assert unknown.warning() == (
        f"unknown setting {misspelt} in the environment is ignored; did you mean DEBUG_MESSAGE_CONVERSION?"
    )


def test_other_programs_variables_are_left_alone():
    assert unknown_variables({"DEBUG": "1", "MESSAGE": "x", "CONVERSION_RATE": "2", "LANG": "C"}, env_file=None) == []


# ------------------------------------------------------------------ map a renamed id back


async def test_a_tool_call_id_the_conversion_changed_reaches_the_client_as_its_own(gw: Gateway):
    # The upstream never reuses a history id in practice; if it did, the client gets its own id back.
    messages = [
        user("go"),
        assistant([tool_use("call_0", "Bash", {"command": "a"})]),
        user([tool_result("call_0", "a")]),
        assistant([tool_use("call_0", "Bash", {"command": "b"})]),
        user([tool_result("call_0", "b")]),
    ]
    fresh_ids: list[str] = []

    def reply_with_the_fresh_id(recorded):
        history = recorded.body["conversationState"]["history"]
        fresh_ids.append(history[-1]["assistantResponseMessage"]["toolUses"][0]["toolUseId"])
        return scripts.tool_reply("Bash", {"command": "c"}, tool_use_id=fresh_ids[-1])

    gw.sim.responder = reply_with_the_fresh_id
    message = await gw.client.messages.create(model=MODEL, max_tokens=50, messages=messages)
    assert fresh_ids[0] != "call_0"
    assert [block.id for block in message.content if block.type == "tool_use"] == ["call_0"]
