"""Custom (freeform) tools through the real gateway, as Codex's `apply_patch` uses them, driven by the
official `openai` SDK over HTTP (`responses.create`, `responses.stream`) and over the WebSocket
(`beta.responses.connect`).

The simulated model calls the tool the way Amazon Q sees it (a JSON object with the one string
`input`); the client must get a `custom_tool_call` item whose `input` is exactly the patch, its
input streamed in `response.custom_tool_call_input.delta` events, and its `custom_tool_call_output`
must reach the model as the tool's result on the next turn.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.responses import ResponseCustomToolCall

from q2api.testing import scripts
from q2api.testing.recorded_requests import RecordedRequest
from tests.support.gateway_harness import MODEL, Gateway, current_user_message
from tests.support.openai_harness import openai_client

PATCH = '*** Begin Patch\n*** Add File: hello.txt\n+Hello, "world" \\ é\n*** End Patch\n'
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Use the `apply_patch` tool to edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch" LF hunk+ "*** End Patch"'},
}
RESULT = "Success. Updated the following files:\nA hello.txt\n"


def patch_call(record: RecordedRequest) -> scripts.Reply:
    """The model: call apply_patch (as Amazon Q calls a tool: JSON input, in fragments), then answer
    from its result."""
    context: dict[str, Any] = current_user_message(record.body).get("userInputMessageContext", {})
    results = context.get("toolResults")
    if results:
        texts = [part.get("text") for result in results for part in result["content"]]
        return scripts.text_reply("Patched." if texts == [RESULT] else f"unexpected: {results}")
    (spec,) = [
        tool["toolSpecification"] for tool in context["tools"] if tool["toolSpecification"]["name"] == "apply_patch"
    ]
    assert spec["inputSchema"]["json"]["required"] == ["input"] and "lark grammar" in spec["description"]
    return scripts.tool_reply("apply_patch", {"input": PATCH}, tool_use_id="call_patch", fragments=7)


def tool_results(gw: Gateway) -> list[dict[str, Any]]:
    return current_user_message(gw.upstream_body())["userInputMessageContext"]["toolResults"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_custom_tool_call_and_its_output_over_http(gw: Gateway, stream: bool):
    gw.sim.responder = patch_call
    async with openai_client(gw) as client:
        if stream:
            async with client.responses.stream(model=MODEL, input="add hello.txt", tools=[APPLY_PATCH]) as events:
                seen = [event async for event in events]
                first = await events.get_final_response()
            deltas = [event.delta for event in seen if event.type == "response.custom_tool_call_input.delta"]
            # The gateway holds a tool call until its input is whole (q2api.translation.tool_input), so
            # the input arrives in one delta however Amazon Q cut it.
            assert "".join(deltas) == PATCH
            (done,) = [event for event in seen if event.type == "response.custom_tool_call_input.done"]
            assert done.input == PATCH
        else:
            first = await client.responses.create(model=MODEL, input="add hello.txt", tools=[APPLY_PATCH])
        (call,) = first.output
        assert isinstance(call, ResponseCustomToolCall)
        assert (call.call_id, call.name, call.input) == ("call_patch", "apply_patch", PATCH)
        assert call.id is not None and call.id.startswith("ctc_")

        second = await client.responses.create(
            model=MODEL,
            previous_response_id=first.id,
            tools=[APPLY_PATCH],
            input=[{"type": "custom_tool_call_output", "call_id": call.call_id, "output": RESULT}],
        )
    assert second.output_text == "Patched."
    (result,) = tool_results(gw)
    assert result["toolUseId"] == "call_patch" and result["content"][0]["text"] == RESULT


async def test_a_custom_tool_call_and_its_output_over_the_websocket(gw: Gateway):
    gw.sim.responder = patch_call
    async with openai_client(gw) as client, client.beta.responses.connect() as connection:
        await connection.send(
            {
                "type": "response.create",
                "model": MODEL,
                "input": "add hello.txt",
                "tools": [APPLY_PATCH],
                "store": False,
            }
        )
        events = [event async for event in _until_done(connection)]
        deltas = [event.delta for event in events if event.type == "response.custom_tool_call_input.delta"]
        assert "".join(deltas) == PATCH
        first = events[-1].response
        (call,) = first.output
        assert (call.type, call.name, call.input) == ("custom_tool_call", "apply_patch", PATCH)

        output = {"type": "custom_tool_call_output", "call_id": call.call_id, "output": RESULT}
        await connection.send(
            {
                "type": "response.create",
                "model": MODEL,
                "input": [output],
                "tools": [APPLY_PATCH],
                "store": False,
                "previous_response_id": first.id,
            }
        )
        second = [event async for event in _until_done(connection)][-1].response
    assert second.status == "completed" and second.output[0].content[0].text == "Patched."
    (result,) = tool_results(gw)
    assert result["toolUseId"] == "call_patch" and result["content"][0]["text"] == RESULT
    # The earlier call reached the model again as its own tool use, from the connection's memory.
    history = json.dumps(gw.upstream_body()["conversationState"]["history"])
    assert "call_patch" in history and json.dumps(PATCH)[1:-1] in history


async def _until_done(connection: Any) -> Any:
    async for event in connection:
        yield event
        if event.type in ("response.completed", "response.failed", "response.incomplete", "error"):
            return
