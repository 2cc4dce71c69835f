"""Native thinking through the gateway (docs/protocol.md#native-thinking): the official SDK → q2api → the simulated Amazon Q.

The simulator lists the Opus models with an `additionalModelRequestFieldsSchema` (native
reasoning) and the others without (the `<thinking>` tag convention); it signs its reasoning per
account, checks the signatures that come back in history, and can refuse them all.
"""

from __future__ import annotations

from typing import Any

import pytest

from q2api.testing import scripts
from q2api.testing.simulated_reasoning import redacted_frame, sign
from q2api.testing.simulated_upstream import SIM_REFRESH_TOKEN
from tests.support.gateway_harness import MODEL, Gateway, capture_logs, current_user_message, user

NATIVE_MODEL = "claude-opus-4-8"  # listed with a reasoning schema by the simulator


def fields_sent(gw: Gateway, index: int = -1) -> Any:
    return gw.sim.requests[index].body.get("additionalModelRequestFields")


def history_reasoning(gw: Gateway, index: int = -1) -> list[Any]:
    history = gw.sim.requests[index].body["conversationState"].get("history", [])
    return [
        entry["assistantResponseMessage"]["reasoningContent"]
        for entry in history
        if "reasoningContent" in entry.get("assistantResponseMessage", {})
    ]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_native_thinking_round_trips_its_signature(gw: Gateway, stream: bool) -> None:
    kwargs: dict[str, Any] = {
        "model": NATIVE_MODEL,
        "max_tokens": 128_000,
        "thinking": {"type": "adaptive"},
        "messages": [user("why is the sky blue?")],
    }
    if stream:
        async with gw.client.messages.stream(**kwargs) as events:
            first = await events.get_final_message()
    else:
        first = await gw.client.messages.create(**kwargs)
    # Sent as native fields within the model's schema (max_tokens kept in its range), no text hint.
    assert fields_sent(gw) == {"thinking": {"type": "adaptive"}, "max_tokens": 64000}
    assert "<thinking_mode>" not in current_user_message(gw.sim.requests[-1].body)["content"]
    thinking = first.content[0]
    assert thinking.type == "thinking" and thinking.thinking == "Reasoning about: why is the sky blue?"
    # The signature came in three fragments; the client gets them joined, as the upstream made it.
    assert thinking.signature == sign(thinking.thinking, SIM_REFRESH_TOKEN)
    assert first.content[1].type == "text" and first.stop_reason == "end_turn"

    follow_up = [
        user("why is the sky blue?"),
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        user("and at sunset?"),
    ]
    second = await gw.client.messages.create(
        model=NATIVE_MODEL, max_tokens=1024, thinking={"type": "adaptive"}, messages=follow_up
    )
    assert second.content[-1].type == "text"
    # The signed thinking went back as reasoningContent, and the simulator accepted its signature.
    assert history_reasoning(gw) == [{"reasoningText": {"text": thinking.thinking, "signature": thinking.signature}}]
    assert len(gw.sim.requests) == 2


async def test_a_refused_signature_is_retried_once_without_the_reasoning(gw: Gateway) -> None:
    first = await gw.client.messages.create(
        model=NATIVE_MODEL, max_tokens=1024, thinking={"type": "adaptive"}, messages=[user("plan it")]
    )
    gw.sim.reasoning.reject_signatures = True  # e.g. the conversation moved to another account
    follow_up = [
        user("plan it"),
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        user("go on"),
    ]
    with capture_logs() as logs:
        second = await gw.client.messages.create(
            model=NATIVE_MODEL, max_tokens=1024, thinking={"type": "adaptive"}, messages=follow_up
        )
    assert second.stop_reason == "end_turn" and second.content[-1].type == "text"
    assert len(gw.sim.requests) == 3  # the refused call, then the retry
    assert history_reasoning(gw, 1) != [] and history_reasoning(gw, 2) == []
    assert any("THINKING_SIGNATURE_INVALID" in line.message and line.level == "WARNING" for line in logs.lines)


async def test_budget_and_effort_become_the_models_fields(gw: Gateway) -> None:
    await gw.client.messages.create(
        model=NATIVE_MODEL,
        max_tokens=2048,
        thinking={"type": "enabled", "budget_tokens": 10_000},
        messages=[user("hi")],
    )
    # The model takes only adaptive: the budget becomes an effort within its levels.
    assert fields_sent(gw) == {
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "medium"},
        "max_tokens": 2048,
    }
    await gw.client.messages.create(
        model=NATIVE_MODEL,
        max_tokens=2048,
        thinking={"type": "adaptive", "display": "summarized"},
        messages=[user("hi")],
        extra_body={"output_config": {"effort": "xhigh"}},
    )
    assert fields_sent(gw) == {
        "thinking": {"type": "adaptive", "display": "summarized"},
        "output_config": {"effort": "max"},  # xhigh is not among its levels: the nearest higher one
        "max_tokens": 2048,
    }


async def test_models_without_native_reasoning_keep_the_tag_hint(gw: Gateway) -> None:
    gw.sim.enqueue(scripts.thinking_reply("tagged thoughts", "Answer."))
    message = await gw.client.messages.create(
        model=MODEL, max_tokens=2048, thinking={"type": "enabled", "budget_tokens": 1024}, messages=[user("hi")]
    )
    assert fields_sent(gw) is None
    assert current_user_message(gw.sim.requests[-1].body)["content"].startswith("<thinking_mode>enabled")
    assert [block.type for block in message.content] == ["thinking", "text"]
    assert message.content[0].signature.startswith("q2api.")  # ours, never sent back as native reasoning


async def test_redacted_reasoning_is_a_redacted_thinking_block_and_goes_back(gw: Gateway) -> None:
    gw.sim.enqueue(
        scripts.stream(scripts.conversation_event(), redacted_frame(b"secret"), scripts.text_events("Done."))
    )
    first = await gw.client.messages.create(
        model=NATIVE_MODEL, max_tokens=1024, thinking={"type": "adaptive"}, messages=[user("x")]
    )
    assert [block.type for block in first.content] == ["redacted_thinking", "text"]
    follow_up = [
        user("x"),
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        user("y"),
    ]
    await gw.client.messages.create(model=NATIVE_MODEL, max_tokens=1024, messages=follow_up)
    assert history_reasoning(gw) == [{"redactedContent": first.content[0].data}]


async def test_a_reply_that_is_only_thinking_ends_like_the_api(gw: Gateway) -> None:
    gw.sim.enqueue(
        scripts.stream(scripts.conversation_event(), scripts.reasoning_events("only thoughts", 2, signature="sig-abc"))
    )
    message = await gw.client.messages.create(
        model=NATIVE_MODEL, max_tokens=1024, thinking={"type": "adaptive"}, messages=[user("x")]
    )
    assert [block.type for block in message.content] == ["thinking"]
    assert message.content[0].signature == "sig-abc"
    assert message.stop_reason == "end_turn" and message.usage.output_tokens >= 1


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        ("claude-opus-4-8-thinking", {"thinking": {"type": "adaptive"}, "max_tokens": 1024}),
        ("claude-4.8-opus-high", {"output_config": {"effort": "high"}, "max_tokens": 1024}),
        (
            "claude-4.8-opus-high-thinking",
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}, "max_tokens": 1024},
        ),
    ],
)
async def test_model_id_suffixes_ask_for_thinking(gw: Gateway, model: str, fields: dict[str, Any]) -> None:
    message = await gw.client.messages.create(model=model, max_tokens=1024, messages=[user("x")])
    assert message.model == model
    assert current_user_message(gw.sim.requests[-1].body)["modelId"] == "claude-opus-4.8"
    assert fields_sent(gw) == fields
