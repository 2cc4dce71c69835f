"""The in-flight cap per account (Q2API_ACCOUNT_MAX_INFLIGHT) under a 100-request burst through the running
gateway: Amazon Q never sees more than the cap at once per account, a request waits briefly for a free
slot, and past the wait it gets the door's overloaded error with `retry-after` — never a pile-up."""

from __future__ import annotations

import asyncio

import pytest

from q2api.testing import scripts
from tests.support.gateway_harness import MODEL, open_gateway
from tests.support.search_replies import answer, search_call

BURST = 100
CAP = 4


class PeakStreams:
    """The most replies the simulator had open at once."""

    def __init__(self, sim) -> None:
        self.peak = 0
        self._sim = sim

    async def watch(self) -> None:
        while True:
            self.peak = max(self.peak, self._sim.active_streams)
            await asyncio.sleep(0.002)


async def burst(gw, path: str, body: dict) -> list:
    async with gw.http(timeout=60) as http:
        return await asyncio.gather(*(http.post(path, json=body) for _ in range(BURST)))


MESSAGES = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.slow  # requests wait for an account's free slots
async def test_a_burst_beyond_the_cap_waits_for_slots_and_is_served_without_exceeding_it(tmp_path):
    async with open_gateway(
        tmp_path, Q2API_ACCOUNT_MAX_INFLIGHT=str(CAP), Q2API_ACCOUNT_INFLIGHT_WAIT_SECONDS="30"
    ) as gw:
        gw.sim.responder = lambda record: scripts.stalled_reply(0.05, text_before="ok")
        peak = PeakStreams(gw.sim)
        watcher = asyncio.create_task(peak.watch())
        responses = await burst(gw, "/v1/messages", MESSAGES)
        watcher.cancel()
    assert [response.status_code for response in responses] == [200] * BURST
    assert len(gw.sim.requests) == BURST
    assert 1 <= peak.peak <= CAP


@pytest.mark.slow  # a request waits for a slot until its wait is over
async def test_past_the_wait_a_request_gets_the_overloaded_error_with_retry_after(tmp_path):
    async with open_gateway(
        tmp_path, Q2API_ACCOUNT_MAX_INFLIGHT=str(CAP), Q2API_ACCOUNT_INFLIGHT_WAIT_SECONDS="0.2"
    ) as gw:
        gw.sim.responder = lambda record: scripts.stalled_reply(1.5, text_before="ok")
        peak = PeakStreams(gw.sim)
        watcher = asyncio.create_task(peak.watch())
        responses = await burst(gw, "/v1/messages", MESSAGES)
        chat = await burst(gw, "/v1/chat/completions", {"model": MODEL, "messages": MESSAGES["messages"]})
        watcher.cancel()
    statuses = [response.status_code for response in responses]
    assert statuses.count(200) == CAP and statuses.count(529) == BURST - CAP
    refused = next(response for response in responses if response.status_code == 529)
    assert refused.json()["error"]["type"] == "overloaded_error"
    assert "requests in flight" in refused.json()["error"]["message"]
    assert int(refused.headers["retry-after"]) > 0
    assert peak.peak <= CAP
    # The OpenAI door says it its own way: 503 with the same retry-after.
    chat_refused = [response for response in chat if response.status_code != 200]
    assert chat_refused and all(response.status_code == 503 for response in chat_refused)
    assert int(chat_refused[0].headers["retry-after"]) > 0
    assert len(gw.sim.requests) == 2 * CAP  # the refused ones never reached Amazon Q


async def test_a_web_search_turn_needs_one_slot_at_a_time(tmp_path):
    # The turn's second upstream call (after its search) opens once the first is closed: with a cap of
    # one it is served at once, not after the wait and an overloaded error.
    query = "python 3.14 release date"
    async with open_gateway(
        tmp_path,
        AMAZONQ_AUTH_METHOD="social",
        Q2API_ACCOUNT_MAX_INFLIGHT="1",
        Q2API_ACCOUNT_INFLIGHT_WAIT_SECONDS="0",
    ) as gw:
        gw.sim.enqueue(search_call(query), answer("It came out in October."))
        message = await gw.client.messages.create(
            model=MODEL,
            max_tokens=256,
            messages=[{"role": "user", "content": "When was Python 3.14 released?"}],
            tools=[{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
        )
    assert message.content[-1].text == "It came out in October."
    assert len(gw.sim.requests) == 2
