"""A `previous_response_id` conversation goes on across two replicas on one shared store.

Two gateways (each with its own data directory, as on two machines) share a PostgreSQL schema,
then a MariaDB/MySQL database. The conversation alternates between them turn by turn, with a
round of parallel function calls in the middle: each turn must find what the other replica
stored, every call's output must reach Amazon Q, and a key's responses stay its own on both.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import openai
import pytest

from q2api.testing import scripts
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.databases import SHARED_KINDS, TEST_SECRET_KEY, scratch_database_url
from tests.support.gateway_harness import CLIENT_KEY, MODEL, current_user_message, gateway_settings
from tests.support.openai_harness import tool_calls_reply

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@contextlib.asynccontextmanager
async def replica(sim: SimulatedUpstream, data_dir: Path, database_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    settings = gateway_settings(sim, data_dir, Q2API_DATABASE_URL=database_url, Q2API_SECRET_KEY=TEST_SECRET_KEY)
    async with running_gateway(settings) as base_url:
        async with openai.AsyncOpenAI(
            base_url=f"{base_url}/v1", api_key=CLIENT_KEY, max_retries=0, timeout=20
        ) as client:
            yield client


@pytest.mark.parametrize("kind", SHARED_KINDS)
async def test_a_conversation_alternates_between_two_replicas(kind: str, tmp_path: Path):
    with scratch_database_url(kind) as database_url:
        async with (
            SimulatedUpstream() as sim,
            replica(sim, tmp_path / "a", database_url) as a,
            replica(sim, tmp_path / "b", database_url) as b,
        ):
            sim.enqueue(scripts.text_reply("Which cities?"))
            first = await a.responses.create(model=MODEL, input="Weather, please.", tools=[WEATHER])

            sim.enqueue(
                tool_calls_reply(
                    ("call_paris", "get_weather", {"city": "Paris"}), ("call_rome", "get_weather", {"city": "Rome"})
                )
            )
            second = await b.responses.create(
                model=MODEL, input="Paris and Rome.", previous_response_id=first.id, tools=[WEATHER]
            )
            calls = [item.call_id for item in second.output if item.type == "function_call"]
            assert calls == ["call_paris", "call_rome"]

            sim.enqueue(scripts.text_reply("Paris 18C, Rome 24C."))
            outputs = [
                {"type": "function_call_output", "call_id": "call_paris", "output": "Paris: 18C"},
                {"type": "function_call_output", "call_id": "call_rome", "output": "Rome: 24C"},
            ]
            third = await a.responses.create(
                model=MODEL, input=outputs, previous_response_id=second.id, tools=[WEATHER]
            )
            results = current_user_message(sim.requests[-1].body)["userInputMessageContext"]["toolResults"]
            assert {result["toolUseId"]: result["content"][0]["text"] for result in results} == {
                "call_paris": "Paris: 18C",
                "call_rome": "Rome: 24C",
            }

            sim.enqueue(scripts.text_reply("You're welcome."))
            fourth = await b.responses.create(model=MODEL, input="Thanks!", previous_response_id=third.id)
            conversation = json.dumps(sim.requests[-1].body["conversationState"])
            for text in (
                "Weather, please.",
                "Which cities?",
                "Paris and Rome.",
                "Paris: 18C",
                "Rome: 24C",
                "Paris 18C, Rome 24C.",
            ):
                assert text in conversation, text

            assert (await a.responses.retrieve(fourth.id)).output_text == "You're welcome."
            assert [item.type for item in (await a.responses.input_items.list(third.id)).data] == [
                "function_call_output",
                "function_call_output",
            ]
            await b.responses.delete(first.id)
            with pytest.raises(openai.NotFoundError, match="no longer stored"):
                await a.responses.create(model=MODEL, input="more", previous_response_id=fourth.id)
