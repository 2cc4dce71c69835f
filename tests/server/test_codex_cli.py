"""The real Codex CLI (`codex exec`, pinned in tests/support/codex_cli.py) runs a shell-tool loop through the gateway.

Codex speaks only the Responses API. Here it is configured as a user would (a `model_provider`
with the gateway's `base_url`, `wire_api = "responses"`, the key in an environment variable),
asks for a command, runs it for real when the (simulated) model calls its shell tool, sends the
output back, and finishes on the model's answer; with its web search on, the gateway runs the
search through Kiro's. Nothing may leave loopback. Skipped, saying why, where npm or the package
cannot be installed.
"""

from __future__ import annotations

import json
from typing import Any

from q2api.testing import scripts
from q2api.testing.recorded_requests import RecordedRequest
from tests.support.codex_cli import run_codex_exec
from tests.support.gateway_harness import CLIENT_KEY, capture_logs, current_user_message, open_gateway
from tests.support.search_replies import search_call

COMMAND = "echo q2api-codex-$((6 * 7))"  # the shell computes 42: proof the command really ran
EXPECTED_OUTPUT = "q2api-codex-42"
ANSWER = "The command printed q2api-codex-42."
SEARCH_QUERY = "q2api release notes"
SEARCH_ANSWER = "q2api now searches the web for Codex."


def shell_loop(record: RecordedRequest) -> scripts.Reply:
    """The model's side of the loop: call the shell tool, then answer from its output."""
    message = current_user_message(record.body)
    context: dict[str, Any] = message.get("userInputMessageContext", {})
    if context.get("toolResults"):
        output = json.dumps(context["toolResults"])
        return scripts.text_reply(ANSWER if EXPECTED_OUTPUT in output else f"unexpected tool output: {output[:200]}")
    names = [tool["toolSpecification"]["name"] for tool in context.get("tools", [])]
    shell = "exec_command" if "exec_command" in names else "shell"
    arguments = {"cmd": COMMAND} if shell == "exec_command" else {"command": ["bash", "-lc", COMMAND]}
    return scripts.tool_reply(shell, arguments, tool_use_id="tooluse_codex_1", text_before="Running it.")


async def test_codex_exec_finishes_a_shell_tool_loop_through_the_gateway(tmp_path):
    async with open_gateway(tmp_path / "gateway") as gw:
        gw.sim.responder = shell_loop
        with capture_logs() as logs:
            run = await run_codex_exec(
                tmp_path / "codex",
                base_url=gw.base_url,
                api_key=CLIENT_KEY,
                prompt=f"Run `{COMMAND}` and tell me what it printed.",
            )

    assert run.returncode == 0, run.stderr[-2000:]
    (command,) = run.items("command_execution")
    assert COMMAND in command["command"] and command["exit_code"] == 0
    assert EXPECTED_OUTPUT in command["aggregated_output"]
    assert [item["text"] for item in run.items("agent_message")][-1] == ANSWER
    assert any(event.get("type") == "turn.completed" for event in run.events)
    # Two model calls: the tool call, then the answer with the command's real output as its tool result.
    assert len(gw.sim.requests) == 2
    (result,) = current_user_message(gw.sim.requests[1].body)["userInputMessageContext"]["toolResults"]
    assert result["toolUseId"] == "tooluse_codex_1" and EXPECTED_OUTPUT in json.dumps(result["content"])
    lines = [line for line in logs.lines if line.message.startswith("POST /v1/responses")]
    assert [line.extra["status"] for line in lines] == [200, 200] and all(line.extra["stream"] for line in lines)
    assert run.outside_attempts == [], run.outside_attempts


def search_then_answer(record: RecordedRequest) -> scripts.Reply:
    """The model's side with Codex's web search on: search once, then answer from the results."""
    context: dict[str, Any] = current_user_message(record.body).get("userInputMessageContext", {})
    if context.get("toolResults"):
        found = json.dumps(context["toolResults"])
        return scripts.text_reply(SEARCH_ANSWER if "Snippet 1 about" in found else f"no results: {found[:200]}")
    names = [tool["toolSpecification"]["name"] for tool in context.get("tools", [])]
    if "web_search" not in names:
        return scripts.text_reply(f"web_search was not offered: {names}")
    return search_call(SEARCH_QUERY, text_before=None)


async def test_codex_with_web_search_on_searches_through_the_gateway(tmp_path):
    """Codex's default config offers OpenAI's web search tool: the gateway runs it through Kiro's search."""
    async with open_gateway(tmp_path / "gateway") as gw:
        gw.sim.responder = search_then_answer
        run = await run_codex_exec(
            tmp_path / "codex",
            base_url=gw.base_url,
            api_key=CLIENT_KEY,
            prompt="What is new in q2api? Search the web.",
            web_search=True,
        )
    assert run.returncode == 0, run.stderr[-2000:]
    assert [item["text"] for item in run.items("agent_message")][-1] == SEARCH_ANSWER
    assert gw.sim.mcp.queries == [SEARCH_QUERY]
    # One response: the search call, then (continued by the gateway with the results) the answer.
    assert len(gw.sim.requests) == 2
    searches = run.items("web_search")
    assert [item.get("query") for item in searches] == [SEARCH_QUERY], run.events
    assert run.outside_attempts == [], run.outside_attempts
