"""Context editing and compaction, emulated by the gateway (issue 32 item 3), driven with the SDK's own types.

The client keeps its whole history and sends it every turn; the gateway edits what reaches Amazon Q
as Anthropic edits what reaches the model, and reports it as the API does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from anthropic.types.beta import (
    BetaClearThinking20251015EditParam,
    BetaClearToolUses20250919EditParam,
    BetaCompact20260112EditParam,
    BetaMessageParam,
)

from q2api.frontdoors.claude.compaction import summary_context
from q2api.frontdoors.claude.context_editing import CLEARED_RESULT
from q2api.testing import scripts
from tests.support.gateway_harness import MODEL, Gateway, open_gateway

BETAS = ["context-management-2025-06-27", "compact-2026-01-12"]


@pytest.fixture
async def gw(tmp_path: Path):
    async with open_gateway(tmp_path, Q2API_PING_INTERVAL="0.05") as gateway:
        yield gateway


def tool_round(number: int, tool: str = "Read", result: str = "file contents " * 40) -> list[BetaMessageParam]:
    call_id = f"toolu_{number:02d}"
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": tool, "input": {"n": number}}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call_id, "content": f"{result} #{number}"}],
        },
    ]


def conversation(rounds: int, tool: str = "Read") -> list[BetaMessageParam]:
    messages: list[BetaMessageParam] = [{"role": "user", "content": "Read the files one by one."}]
    for number in range(rounds):
        messages += tool_round(number, "Grep" if number == 0 else tool)
    return messages


def tool_results_sent(body: dict[str, Any]) -> list[str]:
    state = body["conversationState"]
    messages = [entry.get("userInputMessage") for entry in state.get("history", ())]
    messages.append(state["currentMessage"]["userInputMessage"])
    return [
        result["content"][0]["text"]
        for message in messages
        if message
        for result in (message.get("userInputMessageContext") or {}).get("toolResults", ())
    ]


async def test_clear_tool_uses_clears_the_oldest_results_and_reports_it(gw: Gateway):
    edit: BetaClearToolUses20250919EditParam = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 4},
        "keep": {"type": "tool_uses", "value": 2},
        "exclude_tools": ["Grep"],
        "clear_tool_inputs": True,
    }
    gw.sim.enqueue(scripts.text_reply("Done."))
    message = await gw.client.beta.messages.create(
        model=MODEL, max_tokens=100, messages=conversation(6), betas=BETAS, context_management={"edits": [edit]}
    )
    sent = tool_results_sent(gw.upstream_body())
    # Six uses: the newest two are kept, Grep (#0) is excluded, #1-#3 are cleared.
    assert sent[0].endswith("#0") and sent[4].endswith("#4") and sent[5].endswith("#5")
    assert sent[1:4] == [CLEARED_RESULT] * 3
    history = gw.upstream_body()["conversationState"]["history"]
    inputs = [
        use["input"] for entry in history for use in entry.get("assistantResponseMessage", {}).get("toolUses", ())
    ]
    assert inputs == [{"n": 0}, {}, {}, {}, {"n": 4}, {"n": 5}]
    assert message.context_management is not None
    (applied,) = message.context_management.applied_edits
    assert applied.type == "clear_tool_uses_20250919" and applied.cleared_tool_uses == 3
    assert applied.cleared_input_tokens > 100


async def test_clear_tool_uses_waits_for_its_trigger_and_clear_at_least(gw: Gateway):
    below: BetaClearToolUses20250919EditParam = {"type": "clear_tool_uses_20250919"}  # 100,000 tokens by default
    too_little: BetaClearToolUses20250919EditParam = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 1},
        "clear_at_least": {"type": "input_tokens", "value": 1_000_000},
    }
    gw.sim.enqueue(scripts.text_reply("One."), scripts.text_reply("Two."))
    for edit in (below, too_little):
        message = await gw.client.beta.messages.create(
            model=MODEL, max_tokens=100, messages=conversation(6), betas=BETAS, context_management={"edits": [edit]}
        )
        assert message.context_management is not None and message.context_management.applied_edits == []
        assert CLEARED_RESULT not in tool_results_sent(gw.upstream_body())


async def test_clear_thinking_keeps_the_newest_turns_thinking(gw: Gateway):
    messages: list[BetaMessageParam] = [{"role": "user", "content": "Think, then answer."}]
    for turn in range(3):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"deep thought {turn} " * 30, "signature": "q2api.local"},
                    {"type": "text", "text": f"Answer {turn}."},
                ],
            }
        )
        messages.append({"role": "user", "content": f"And then {turn}?"})
    edit: BetaClearThinking20251015EditParam = {
        "type": "clear_thinking_20251015",
        "keep": {"type": "thinking_turns", "value": 1},
    }
    gw.sim.enqueue(scripts.thinking_reply("hmm", "Final."))
    message = await gw.client.beta.messages.create(
        model=MODEL,
        max_tokens=2048,
        messages=messages,
        thinking={"type": "enabled", "budget_tokens": 1024},
        betas=BETAS,
        context_management={"edits": [edit]},
    )
    history = str(gw.upstream_body()["conversationState"]["history"])
    assert "deep thought 2" in history and "deep thought 0" not in history and "deep thought 1" not in history
    assert message.context_management is not None
    (applied,) = message.context_management.applied_edits
    assert (applied.type, applied.cleared_thinking_turns) == ("clear_thinking_20251015", 2)
    assert applied.cleared_input_tokens > 0


def long_conversation() -> list[BetaMessageParam]:
    """Over 50,000 estimated tokens: past the lowest trigger compaction takes."""
    messages = conversation(20, tool="Read")
    for message in messages:
        content = message["content"]
        if isinstance(content, list) and content[0]["type"] == "tool_result":
            content[0]["content"] = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 300
    return messages


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_compaction_summarises_then_goes_on_from_the_summary(gw: Gateway, stream: bool):
    edit: BetaCompact20260112EditParam = {
        "type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": 50_000},
    }
    gw.sim.enqueue(
        scripts.text_reply("<summary>Read 20 files; all lorem ipsum.</summary>"), scripts.text_reply("Next step.")
    )
    request: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 500,
        "messages": long_conversation(),
        "betas": BETAS,
        "context_management": {"edits": [edit]},
    }
    if stream:
        async with gw.client.beta.messages.stream(**request) as events:
            message = await events.get_final_message()
    else:
        message = await gw.client.beta.messages.create(**request)
    assert [block.type for block in message.content] == ["compaction", "text"]
    assert message.content[0].content == "Read 20 files; all lorem ipsum."
    assert message.stop_reason == "end_turn"
    assert message.usage.iterations is not None and [it.type for it in message.usage.iterations] == [
        "compaction",
        "message",
    ]
    summarising, continued = gw.upstream_body(0), gw.upstream_body(1)
    assert (
        "Your context is about to be compacted"
        in summarising["conversationState"]["currentMessage"]["userInputMessage"]["content"]
    )
    going_on = continued["conversationState"]
    assert "consectetur" not in str(going_on)  # the summary alone, not the twenty results
    assert "Read 20 files; all lorem ipsum." in str(going_on)

    # The next turn reads the compaction block back as the start of the conversation.
    gw.sim.enqueue(scripts.text_reply("Sure."))
    follow_up = [*long_conversation(), {"role": "assistant", "content": [block.to_dict() for block in message.content]}]
    follow_up.append({"role": "user", "content": "Go on."})
    await gw.client.beta.messages.create(**{**request, "messages": follow_up})
    assert len(gw.sim.requests) == 3  # no second compaction: the conversation is short again
    state = gw.upstream_body()["conversationState"]
    body = str(state)
    assert "consectetur" not in body and summary_context("Read 20 files; all lorem ipsum.")[:40] in body
    assert state["currentMessage"]["userInputMessage"]["content"].endswith("Go on.")


async def test_pause_after_compaction_answers_with_the_block_alone(gw: Gateway):
    edit: BetaCompact20260112EditParam = {
        "type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": 50_000},
        "pause_after_compaction": True,
        "instructions": "Summarise in one line.",
    }
    gw.sim.enqueue(scripts.text_reply("Twenty files read."))
    message = await gw.client.beta.messages.create(
        model=MODEL, max_tokens=500, messages=long_conversation(), betas=BETAS, context_management={"edits": [edit]}
    )
    assert [block.type for block in message.content] == ["compaction"]
    assert message.content[0].content == "Twenty files read."
    assert message.stop_reason == "compaction"
    assert len(gw.sim.requests) == 1
    asked = gw.upstream_body()["conversationState"]["currentMessage"]["userInputMessage"]["content"]
    assert asked.endswith("Summarise in one line.") and "about to be compacted" not in asked


async def test_the_compaction_parameter_compacts_at_once(gw: Gateway):
    gw.sim.enqueue(scripts.text_reply("<summary>A short chat.</summary>"))
    message = await gw.client.beta.messages.create(
        model=MODEL,
        max_tokens=500,
        messages=conversation(2),
        betas=["compact-2026-09-04"],
        compaction={"type": "summarize"},
    )
    assert [(block.type, block.content) for block in message.content] == [("compaction", "A short chat.")]
    assert message.stop_reason == "compaction"


async def test_a_trigger_below_the_minimum_is_a_400_naming_it(gw: Gateway):
    import anthropic

    with pytest.raises(anthropic.BadRequestError) as caught:
        await gw.client.beta.messages.create(
            model=MODEL,
            max_tokens=10,
            messages=conversation(1),
            betas=BETAS,
            context_management={
                "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 1000}}]
            },
        )
    assert caught.value.body["error"]["message"].startswith(
        "context_management.edits.0.trigger.value: must be at least"
    )
