"""bench/fuzz_doors.py works end to end (a real `q2api serve` on loopback, a few bodies per door), its
bodies are a function of (door, seed, index), and its judges catch what they must.

No figure is asserted: the long run's figures are in BENCHMARKS.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.door_bodies import DOOR_FUZZERS

ROOT = Path(__file__).resolve().parents[2]


def test_a_body_is_a_function_of_door_seed_and_index() -> None:
    for name, fuzzer in DOOR_FUZZERS.items():
        assert fuzzer.request(5, 17) == fuzzer.request(5, 17), name
        drawn = [fuzzer.request(5, index) for index in range(20)]
        assert len({(request.method, request.path, request.body) for request in drawn}) > 15, name


def test_the_judges_refuse_a_5xx_and_an_envelope_of_another_door() -> None:
    anthropic = b'{"type":"error","error":{"type":"invalid_request_error","message":"x"}}'
    openai = b'{"error":{"message":"x","type":"invalid_request_error","param":null,"code":null}}'
    assert DOOR_FUZZERS["messages"].problem(400, anthropic) is None
    assert DOOR_FUZZERS["messages"].problem(400, openai) is not None
    assert DOOR_FUZZERS["chat"].problem(400, openai) is None
    assert DOOR_FUZZERS["responses"].problem(400, anthropic) is not None
    assert DOOR_FUZZERS["admin"].problem(400, b'{"error":{"type":"invalid_request","message":"x"}}') is None
    for fuzzer in DOOR_FUZZERS.values():
        assert fuzzer.problem(500, openai) is not None
        assert fuzzer.problem(200, b"anything") is None


def test_the_bench_runs_every_door_against_a_served_gateway(tmp_path) -> None:
    run = subprocess.run(
        [sys.executable, "bench/fuzz_doors.py", "--bodies", "25", "--concurrency", "4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    table = run.stdout.splitlines()
    for door in DOOR_FUZZERS:
        row = next(line for line in table if line.startswith(f"{door} ") and "bodies" not in line)
        assert row.split()[1] == "25", row
