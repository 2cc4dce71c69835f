"""The rest of the Claude surface (issue 32 item 4), through the official SDK and the simulated Amazon Q.

Claude Code's billing line, the top-level cache marker, `between_tools` thinking, system messages'
own fields, the refusals by name, every beta name, the stop reasons Amazon Q can signal, and the
fields no type knows.
"""

from __future__ import annotations

import typing
import uuid
from typing import Any

import anthropic
import orjson
import pytest
from anthropic.types import AnthropicBetaParam

from q2api.testing import scripts
from tests.support.gateway_harness import MODEL, Gateway, capture_logs, current_user_message, user

NATIVE_MODEL = "claude-opus-4-8"  # listed with a reasoning schema by the simulator
BILLING = "x-anthropic-billing-header: cc_version=2.1.332.4f1; cc_entrypoint=cli; cch=8d3e1;"


def upstream_text(gw: Gateway, index: int = -1) -> str:
    return gw.sim.requests[index].raw.decode()


async def test_claude_codes_billing_line_never_reaches_amazon_q(gw: Gateway) -> None:
    system: list[Any] = [
        {"type": "text", "text": BILLING},
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Project notes.", "cache_control": {"type": "ephemeral"}},
    ]
    gw.sim.enqueue(scripts.text_reply("Hi."), scripts.text_reply("Hi again."))
    with capture_logs() as logs:
        await gw.client.messages.create(model=MODEL, max_tokens=50, system=system, messages=[user("hi")])
        # The line can also share the first block with text that follows it.
        shared = [{"type": "text", "text": f"{BILLING}\nYou are Claude Code."}]
        await gw.client.messages.create(model=MODEL, max_tokens=50, system=shared, messages=[user("hi")])
    for index in (0, 1):
        sent = upstream_text(gw, index)
        assert "x-anthropic-billing-header" not in sent and "cch=" not in sent
        assert "You are Claude Code." in sent
    # The first cache point still covers the system prompt (its context turn), now without the line.
    first = gw.sim.requests[0].body["conversationState"]["history"][0]["userInputMessage"]
    assert first.get("cachePoint") == {"type": "default"}
    assert any(
        line.level == "DEBUG" and "x-anthropic-billing-header: line removed" in line.message for line in logs.lines
    )


async def test_a_top_level_cache_control_marks_the_last_block(gw: Gateway) -> None:
    gw.sim.enqueue(scripts.text_reply("Noted."))
    messages: list[Any] = [user("first"), {"role": "assistant", "content": "ok"}, user("second")]
    await gw.client.messages.create(model=MODEL, max_tokens=50, messages=messages, cache_control={"type": "ephemeral"})
    state = gw.upstream_body()["conversationState"]
    assert state["currentMessage"]["userInputMessage"]["cachePoint"] == {"type": "default"}
    assert not any("cachePoint" in str(entry) for entry in state.get("history", ()))


@pytest.mark.parametrize(("model", "native"), [(NATIVE_MODEL, True), (MODEL, False)], ids=["native", "tags"])
async def test_between_tools_thinking_is_served(gw: Gateway, model: str, native: bool) -> None:
    if not native:
        gw.sim.enqueue(scripts.thinking_reply("Let me see.", "Done."))
    message = await gw.client.messages.create(
        model=model, max_tokens=4096, thinking={"type": "between_tools"}, messages=[user("plan it")]
    )
    assert [block.type for block in message.content] == ["thinking", "text"]
    sent = gw.upstream_body()
    if native:
        # The catalogue's schema has no `between_tools`: the model's own adaptive thinking stands in.
        assert sent["additionalModelRequestFields"]["thinking"] == {"type": "adaptive"}
    else:
        assert "<thinking_mode>enabled</thinking_mode>" in current_user_message(sent)["content"]


async def test_system_messages_clear_at_and_effort(gw: Gateway) -> None:
    gw.sim.enqueue(scripts.text_reply("Fine."))
    messages: list[Any] = [
        {"role": "system", "content": "Reminder for this turn only.", "clear_at": "next_user_message"},
        user("first"),
        {"role": "assistant", "content": "ok"},
        {"role": "system", "content": "Always true.", "clear_at": "never"},
        user("second"),
        {"role": "system", "content": "Now think hard.", "output_config": {"effort": "max"}},
    ]
    await gw.client.beta.messages.create(
        model=NATIVE_MODEL, max_tokens=1024, thinking={"type": "adaptive"}, messages=messages
    )
    sent = upstream_text(gw)
    assert "Reminder for this turn only." not in sent  # a later user message came
    assert "Always true." in sent and "Now think hard." in sent
    assert gw.upstream_body()["additionalModelRequestFields"]["output_config"] == {"effort": "max"}


REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("mcp_servers", {"mcp_servers": [{"type": "url", "url": "https://mcp.example", "name": "x"}]}, "mcp_servers: "),
    ("container", {"container": {"skills": [{"type": "anthropic", "skill_id": "pptx"}]}}, "container: "),
    ("code_execution", {"tools": [{"type": "code_execution_20250825", "name": "code_execution"}]}, "tools.0.type: "),
    ("web_fetch", {"tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]}, "tools.0.type: "),
    ("mcp_toolset", {"tools": [{"type": "mcp_toolset", "mcp_server_name": "x"}]}, "tools.0.type: "),
]


@pytest.mark.parametrize(
    ("extra", "starts"), [(extra, starts) for _, extra, starts in REFUSED], ids=[r[0] for r in REFUSED]
)
async def test_what_cannot_be_served_is_refused_by_name(gw: Gateway, extra: dict[str, Any], starts: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        await gw.client.beta.messages.create(model=MODEL, max_tokens=50, messages=[user("hi")], **extra)
    message = caught.value.body["error"]["message"]
    assert message.startswith(starts) and (" instead" in message or "leave" in message or ": run " in message)
    assert not gw.sim.requests


def every_beta_name() -> list[str]:
    literal = next(arg for arg in typing.get_args(AnthropicBetaParam) if typing.get_origin(arg) is typing.Literal)
    return list(typing.get_args(literal))


async def test_every_beta_name_is_accepted_and_never_forwarded(gw: Gateway) -> None:
    names = every_beta_name()
    assert len(names) > 40  # the SDK's whole list, not a sample
    gw.sim.enqueue(scripts.text_reply("Hi."))
    message = await gw.client.beta.messages.create(model=MODEL, max_tokens=50, messages=[user("hi")], betas=names)
    assert message.content[0].type == "text"
    (sent,) = gw.sim.requests
    headers = " ".join(f"{key}: {value}" for key, value in sent.headers.items()).lower()
    assert "anthropic-beta" not in headers
    assert not [name for name in names if name in headers or name in sent.raw.decode()]


async def test_amazon_qs_content_filter_is_a_refusal_with_its_details(gw: Gateway) -> None:
    gw.sim.enqueue(
        scripts.stream(
            scripts.conversation_event(),
            scripts.text_events("I can't help"),
            scripts.event("metadataEvent", {"stopReason": "guardrail_intervened"}),
        )
    )
    message = await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[user("something bad")])
    assert message.stop_reason == "refusal"
    assert message.stop_details is not None and message.stop_details.type == "refusal"
    assert message.stop_details.explanation


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_full_context_window_is_model_context_window_exceeded(gw: Gateway, stream: bool) -> None:
    gw.sim.enqueue(
        scripts.stream(
            scripts.conversation_event(), scripts.text_events("and then"), scripts.context_usage_event(100.0)
        )
    )
    if stream:
        async with gw.client.messages.stream(model=MODEL, max_tokens=50, messages=[user("go on")]) as events:
            message = await events.get_final_message()
    else:
        message = await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[user("go on")])
    assert message.stop_reason == "model_context_window_exceeded"


async def test_a_field_no_type_knows_is_named_once_in_the_log_and_the_request_is_served(gw: Gateway) -> None:
    gw.sim.enqueue(scripts.text_reply("Hi."), scripts.text_reply("Hi."))
    new_field = f"shiny_new_{uuid.uuid4().hex[:8]}"  # a name this process has never reported
    message: dict[str, Any] = {"role": "user", "content": "hi", "mood": "sunny"}
    body = {"model": MODEL, "max_tokens": 50, "messages": [message], new_field: 1}
    with capture_logs() as logs:
        async with gw.http() as http:
            for _ in range(2):
                response = await http.post("/v1/messages", content=orjson.dumps(body))
                assert response.status_code == 200
    warnings = [line.message for line in logs.lines if line.level == "WARNING" and "does not know" in line.message]
    assert len(warnings) == 1 and new_field in warnings[0]
    assert "sunny" not in upstream_text(gw)
