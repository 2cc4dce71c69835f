"""Fuzz: thousands of hostile bodies against the real gateway's doors — never a 500, always the door's envelope, no traceback.

The bodies come from tests/support/fuzz_bodies.py (the Claude door) and
tests/support/fuzz_chat_bodies.py (the OpenAI door); `python -m bench.fuzz_gateway`
runs the same check on many more. One gateway (on the simulated upstream, whose
default reply echoes the request) serves the whole module from background
threads, so a plain synchronous client can post bodies quickly.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings

from q2api.testing.gateway_server import GatewayThread
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.fuzz_bodies import cases
from tests.support.fuzz_chat_bodies import chat_cases, door_problem
from tests.support.gateway_harness import JSON_CLIENT_HEADERS, capture_logs, gateway_settings

EXAMPLES = 1000  # a thousand bodies a door per CI run: about 20 s of CPU each; bench.fuzz_gateway runs more
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> Iterator[httpx2.Client]:
    with SimulatedUpstream.run_in_thread() as upstream:
        data_dir = tmp_path_factory.mktemp("fuzz-data")
        with GatewayThread(gateway_settings(upstream, data_dir, Q2API_STREAM_HOLD_SECONDS="0")) as gateway:
            with httpx2.Client(base_url=gateway.base_url, headers=JSON_CLIENT_HEADERS, timeout=30) as http:
                yield http


def assert_answered_well(client: httpx2.Client, endpoint: str, body: bytes) -> None:
    with capture_logs() as logs:
        response = client.post(endpoint, content=body)
    assert door_problem(endpoint, response.status_code, response.content) is None, (endpoint, body[:500])
    assert "Traceback" not in logs.text, logs.text
    assert not [line for line in logs.lines if line.level in ("ERROR", "CRITICAL")], logs.text


@FUZZ_SETTINGS
@given(case=cases)
def test_no_hostile_body_is_a_500_or_a_traceback(client, case) -> None:
    assert_answered_well(client, *case)


@FUZZ_SETTINGS
@given(case=chat_cases)
def test_no_hostile_chat_completions_body_is_a_500_or_a_traceback(client, case) -> None:
    assert_answered_well(client, *case)
