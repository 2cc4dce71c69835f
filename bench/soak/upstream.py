"""How the simulated Amazon Q answers the soak: each request's behaviour travels as a marker in its text.

A client that wants a fault says so in its message (`soak:fault:throttle`), so that every failure the
gateway relays can be traced to the request that asked for it: a 5xx on a request that asked for none
is the gateway's own.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Iterator
from typing import Any

from q2api.testing import scripts
from q2api.testing.recorded_requests import RecordedRequest
from q2api.testing.simulated_upstream import SimulatedUpstream
from q2api.testing.simulation_thread import SimulationThread

MARKER = "soak:"
FAULTS = ("throttle", "server-error", "reset", "slow-first-byte", "cut")
SLOW_CHUNKS, SLOW_PAUSE = 5, 0.25
SLOW_REPLY_SECONDS = (SLOW_CHUNKS - 1) * SLOW_PAUSE  # a slow reply's stream lasts at least this long
TOOL_NAME = "read_notes"


def marker(behaviour: str) -> str:
    return f"{MARKER}{behaviour}"


def fault_marker(kind: str) -> str:
    return marker(f"fault:{kind}")


def _current_message(body: Any) -> dict[str, Any]:
    try:
        message = body["conversationState"]["currentMessage"]["userInputMessage"]
    except (KeyError, TypeError):
        return {}
    return message if isinstance(message, dict) else {}


def _has_tool_results(body: Any) -> bool:
    context = _current_message(body).get("userInputMessageContext") or {}
    return bool(isinstance(context, dict) and context.get("toolResults"))


class SoakResponder:
    """The simulator's `responder`: a reply by marker; None (the simulator's echo) for anything else."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self.faults_served: dict[str, int] = dict.fromkeys(FAULTS, 0)

    def __call__(self, record: RecordedRequest) -> scripts.Reply | None:
        text = str(_current_message(record.body).get("content", ""))
        if MARKER not in text:
            return None
        for kind in FAULTS:
            if fault_marker(kind) in text:
                self.faults_served[kind] += 1
                return self._fault(kind)
        if marker("tools") in text and not _has_tool_results(record.body):
            return scripts.tool_reply(
                TOOL_NAME, {"topic": "soak"}, tool_use_id=f"tooluse_{self._rng.getrandbits(48):x}"
            )
        if marker("slow") in text:
            return scripts.text_reply("slowly " * 30, chunks=SLOW_CHUNKS, delay=SLOW_PAUSE)
        return scripts.text_reply("steady " * 40, chunks=8, delay=0.002)

    def _fault(self, kind: str) -> scripts.Reply:
        if kind == "throttle":
            return scripts.throttled(retry_after=1)
        if kind == "server-error":
            return scripts.server_error(500)
        if kind == "reset":
            return scripts.dropped_reply()
        if kind == "slow-first-byte":
            return scripts.slow_headers(1.5)
        return scripts.truncated_reply()


@contextlib.contextmanager
def soak_simulator(seed: int) -> Iterator[SimulationThread]:
    """The simulated Amazon Q every deployment of a run is soaked against, answering as `SoakResponder` says."""
    # Its web server reports each client that left mid-reply: expected here, by the dozen.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    with SimulatedUpstream.run_in_thread() as sim:
        sim.sim.usage_frames = True  # credits metered on every reply: the budgets have something to count
        sim.sim.responder = SoakResponder(seed)
        yield sim
