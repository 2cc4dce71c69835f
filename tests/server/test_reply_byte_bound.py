"""A reply is bounded in bytes as well as in tokens (Q2API_MAX_REPLY_BYTES).

Repetitive text costs few tokens: a simulated upstream that sends a megabyte of one short word over
and over stays far inside a generous `max_tokens`, and before the bound the gateway held it all
(≈250 MB for one request in the attack round, the client waiting). Now the reply ends at the
bound with `stop_reason: max_tokens`, streamed or not, and a tool call whose input passes it is
withheld.
"""

from __future__ import annotations

import pytest

from q2api.testing import scripts
from tests.support.gateway_harness import MODEL, open_gateway, user

BOUND = 64 * 1024
WORDS = "ab " * 400_000  # 1.2 MB of text that prices at a fraction of max_tokens' worth


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_repetitive_reply_ends_at_the_byte_bound_with_max_tokens(tmp_path, stream: bool) -> None:
    async with open_gateway(tmp_path, Q2API_MAX_REPLY_BYTES=str(BOUND)) as gw:
        gw.sim.enqueue(scripts.text_reply(WORDS, chunks=300))
        if stream:
            async with gw.client.messages.stream(model=MODEL, max_tokens=128_000, messages=[user("hi")]) as events:
                message = await events.get_final_message()
        else:
            message = await gw.client.messages.create(model=MODEL, max_tokens=128_000, messages=[user("hi")])
    text = "".join(block.text for block in message.content if block.type == "text")
    assert message.stop_reason == "max_tokens"
    assert BOUND - 4 <= len(text.encode()) <= BOUND
    assert WORDS.startswith(text)


async def test_a_tool_input_past_the_byte_bound_is_withheld_and_the_reply_ends_with_max_tokens(tmp_path) -> None:
    async with open_gateway(tmp_path, Q2API_MAX_REPLY_BYTES=str(BOUND)) as gw:
        gw.sim.enqueue(
            scripts.tool_reply("Write", {"content": "x" * (4 * BOUND)}, text_before="Writing it", fragments=20)
        )
        tools = [{"name": "Write", "input_schema": {"type": "object"}}]
        message = await gw.client.messages.create(
            model=MODEL, max_tokens=128_000, messages=[user("write")], tools=tools
        )
    assert message.stop_reason == "max_tokens"
    assert [block.type for block in message.content] == ["text"]


async def test_a_reply_within_the_bound_is_whole(tmp_path) -> None:
    async with open_gateway(tmp_path, Q2API_MAX_REPLY_BYTES=str(BOUND)) as gw:
        gw.sim.enqueue(scripts.text_reply("ab " * 1000, chunks=10))
        message = await gw.client.messages.create(model=MODEL, max_tokens=128_000, messages=[user("hi")])
    assert message.stop_reason == "end_turn"
    assert message.content[0].text == "ab " * 1000
