"""The Claude Code workloads of bench_big_turns.py: generated, deterministic request bodies of a real turn's size.

    body = workload_body("1mb")   # bytes, the same on every machine and every run

Claude Code sends its whole session with every turn: 0.4-1.3 MB with Opus, up to 2 MB and more in a
long session (docs/protocol.md, limits). Each workload is `claude_code_request(size_kb=...)`
(tests/support/claude_code_request.py: three system blocks, 22 tools with their schemas, rounds
of thinking + text + two parallel tool calls answered by two tool results and a reminder) encoded
with orjson, its thinking blocks signed as the simulated Amazon Q signs the reasoning it streams to
the benchmark's account: in a real session the history's signatures are the ones Amazon Q gave this
account, and it accepts them. (The generator's placeholder signatures would be refused, and every
turn would cost a second upstream call without the history's reasoning.) `DIGESTS` pins their bytes: a change to the generator that changes a workload changes
its figures too, and tests/bench/test_workloads.py says so before a comparison is made across it.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import orjson

from q2api.testing.simulated_reasoning import sign
from q2api.testing.simulated_upstream import SIM_REFRESH_TOKEN
from tests.support.claude_code_request import claude_code_request

# name -> size in KB asked of the generator (the body comes out a little over it).
WORKLOADS = {"200kb": 200, "1mb": 1024, "2mb": 2048}
# name -> SHA-256 of the body: the workloads are the same bytes on every run.
DIGESTS = {
    "200kb": "aa94e60fd404da12ec819b8d21cbdf22b715770fa68aa2251707c1b2f1964c72",
    "1mb": "32f555a2849f998b99a4c45027d14373e8c90097f70c3021131a55e36f11ea42",
    "2mb": "3a0631dfb44edbfc970fe7ba925529ccdce9473e921e5d818f9643b88938ed49",
}


@functools.cache
def workload_body(name: str) -> bytes:
    """The request body of workload `name` (a key of WORKLOADS)."""
    return orjson.dumps(signed_for_simulator(claude_code_request(size_kb=WORKLOADS[name])))


def claude_code_body(size_kb: int) -> bytes:
    """A Claude Code body of `size_kb`, signed for the simulator: the workload of that size if there is one."""
    for name, workload_kb in WORKLOADS.items():
        if workload_kb == size_kb:
            return workload_body(name)
    return orjson.dumps(signed_for_simulator(claude_code_request(size_kb=size_kb)))


def signed_for_simulator(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with every thinking block signed as the simulator signs reasoning for its one account."""
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else ():
            if block["type"] == "thinking":
                block["signature"] = sign(block["thinking"], SIM_REFRESH_TOKEN)
    return body


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()
