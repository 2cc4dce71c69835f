"""The benchmark's Claude Code workloads (bench/support/workloads.py) are the bytes their digests pin, and a turn the
simulated Amazon Q accepts as it is: their thinking signed as it signs reasoning, no refusal, no second call."""

from __future__ import annotations

import orjson
import pytest

from bench.support.workloads import DIGESTS, WORKLOADS, claude_code_body, digest, workload_body
from q2api.testing.simulated_reasoning import sign
from q2api.testing.simulated_upstream import SIM_REFRESH_TOKEN


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_each_workload_is_the_pinned_bytes_of_its_size(name: str) -> None:
    body = workload_body(name)
    assert digest(body) == DIGESTS[name]
    assert WORKLOADS[name] * 1024 <= len(body) < WORKLOADS[name] * 1024 * 1.05
    assert claude_code_body(WORKLOADS[name]) is body


def test_every_thinking_block_carries_the_signature_the_simulator_made() -> None:
    document = orjson.loads(workload_body("200kb"))
    thinking = [
        block
        for message in document["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "thinking"
    ]
    assert thinking
    assert all(block["signature"] == sign(block["thinking"], SIM_REFRESH_TOKEN) for block in thinking)
