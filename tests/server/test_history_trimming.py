"""Q2API_TRIM_HISTORY=oldest through the running gateway: what reaches the simulated Amazon Q fits its
limits, and the log's `messages normalized:` record says that history was trimmed."""

from __future__ import annotations

import orjson

from q2api.conversion.trimming import TRIM_ACKNOWLEDGEMENT
from q2api.testing import scripts
from tests.support.converter_helpers import assistant, tool_result, tool_use
from tests.support.gateway_harness import MODEL, capture_logs, open_gateway, user


def long_session(rounds: int, result: str = "ok") -> list[dict]:
    messages = [user("Port the test suite to pytest.")]
    for number in range(rounds):
        messages.append(assistant([tool_use(f"toolu_{number}", "Bash", {"command": f"pytest -k {number}"})]))
        messages.append(user([tool_result(f"toolu_{number}", result)]))
    return messages


async def test_a_session_over_the_history_cap_is_trimmed_when_asked(tmp_path):
    async with open_gateway(tmp_path, Q2API_TRIM_HISTORY="oldest") as gw:
        gw.sim.enqueue(scripts.text_reply("done"))
        with capture_logs() as logs:
            await gw.client.messages.create(model=MODEL, max_tokens=50, messages=long_session(150))
        history = gw.upstream_body()["conversationState"]["history"]
    assert len(history) <= 198
    assert history[0]["userInputMessage"]["content"] == "Port the test suite to pytest."
    assert history[1]["assistantResponseMessage"]["content"] == TRIM_ACKNOWLEDGEMENT
    [record] = [line for line in logs.lines if line.message == "messages normalized:"]
    assert record.extra["history_trimmed"] == 1 and record.extra["before"] == 301
    assert record.extra["after"] == len(history) + 1


async def test_a_body_over_the_size_limit_is_trimmed_below_it(tmp_path):
    async with open_gateway(tmp_path, Q2API_TRIM_HISTORY="oldest") as gw:
        gw.sim.enqueue(scripts.text_reply("done"))
        await gw.client.messages.create(model=MODEL, max_tokens=50, messages=long_session(60, result="x" * 25_000))
        sent = gw.sim.requests[-1].raw
    assert len(sent) <= 1_200_000  # the 1.5 MB conversation, trimmed to fit


async def test_without_the_setting_nothing_is_trimmed(tmp_path):
    async with open_gateway(tmp_path) as gw:
        gw.sim.enqueue(scripts.text_reply("done"))
        await gw.client.messages.create(model=MODEL, max_tokens=50, messages=long_session(150))
        assert len(gw.upstream_body()["conversationState"]["history"]) == 300
    assert orjson.dumps(gw.upstream_body())
