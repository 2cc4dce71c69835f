"""The real Codex CLI (`codex exec`, pinned in tests/support/codex_cli.py) works through the gateway.

Codex speaks only the Responses API. Configured as the README shows (a `model_provider` with the
gateway's `base_url`, `wire_api = "responses"`, the key in an environment variable) it asks for a
command, runs it for real when the (simulated) model calls its shell tool, sends the output back,
and finishes on the model's answer; with its web search on, the gateway runs the search through
Kiro's. Configured to take its key from a command, it reads the gateway's catalogue and edits a
file with `apply_patch` as a custom tool, over HTTP and over the WebSocket; its built-in `openai`
provider pointed at the gateway speaks the WebSocket. Nothing may leave loopback. Skipped, saying
why, where npm or the package cannot be installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from q2api.testing import scripts
from q2api.testing.recorded_requests import RecordedRequest
from tests.support.codex_cli import CodexRun, Provider, run_codex_exec
from tests.support.gateway_harness import CLIENT_KEY, Gateway, capture_logs, current_user_message, open_gateway
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


# -- editing a file: apply_patch as a custom tool, over HTTP and over the WebSocket ----------------

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+Hello from apply_patch\n*** End Patch\n"
SHELL_EDIT = "echo 'Hello from the shell' > hello.txt"
EDITED = "hello.txt is written."


def edit_a_file(record: RecordedRequest) -> scripts.Reply:
    """The model's side: write hello.txt with apply_patch when Codex offers it, else with its shell."""
    context: dict[str, Any] = current_user_message(record.body).get("userInputMessageContext", {})
    if context.get("toolResults"):
        return scripts.text_reply(EDITED)
    specs = {tool["toolSpecification"]["name"]: tool["toolSpecification"] for tool in context.get("tools", [])}
    if "apply_patch" in specs:
        # Codex sent it as a custom tool: the door offers it as one string, its grammar described.
        assert "lark grammar" in specs["apply_patch"]["description"], specs["apply_patch"]
        return scripts.tool_reply("apply_patch", {"input": PATCH}, tool_use_id="tooluse_patch", fragments=5)
    return scripts.tool_reply("exec_command", {"cmd": SHELL_EDIT}, tool_use_id="tooluse_shell")


async def edit_through_the_gateway(tmp_path: Path, **options: Any) -> tuple[CodexRun, list[Any], Gateway]:
    async with open_gateway(tmp_path / "gateway") as gw:
        gw.sim.responder = edit_a_file
        with capture_logs() as logs:
            run = await run_codex_exec(
                tmp_path / "codex", base_url=gw.base_url, api_key=CLIENT_KEY, prompt="Create hello.txt.", **options
            )
    assert run.returncode == 0, run.stderr[-2000:]
    assert [item["text"] for item in run.items("agent_message")][-1] == EDITED
    assert run.outside_attempts == [], run.outside_attempts
    return run, logs.lines, gw


@pytest.mark.parametrize("websockets", [False, True], ids=["http", "websocket"])
async def test_codex_edits_a_file_with_apply_patch_as_a_custom_tool(tmp_path, websockets: bool):
    """A provider whose key comes from a command: Codex reads the gateway's catalogue, and so sends
    apply_patch as a custom (freeform) tool; with `supports_websockets` it speaks the WebSocket."""
    run, lines, gw = await edit_through_the_gateway(tmp_path, provider=Provider.COMMAND_AUTH, websockets=websockets)

    assert (tmp_path / "codex" / "work" / "hello.txt").read_text() == "Hello from apply_patch\n"
    (change,) = run.items("file_change")
    assert change["status"] == "completed" and change["changes"][0]["kind"] == "add"
    # The catalogue was read (its entry is what made Codex send apply_patch).
    assert any(line.message == "GET /v1/models" and line.extra["status"] == 200 for line in lines)
    # Codex's result of the patch reached the model as the tool's result.
    (result,) = current_user_message(gw.sim.requests[-1].body)["userInputMessageContext"]["toolResults"]
    assert result["toolUseId"] == "tooluse_patch" and "hello.txt" in json.dumps(result["content"])
    turns = [line for line in lines if line.message.startswith("POST /v1/responses")]
    assert [line.extra["status"] for line in turns] == [200, 200]
    assert [line.extra.get("transport") for line in turns] == (["websocket"] * 2 if websockets else [None, None])


async def test_codex_s_own_openai_provider_speaks_the_websocket(tmp_path):
    """The built-in `openai` provider pointed at the gateway: the WebSocket first; with an API key
    Codex 0.171.0 reads no catalogue, so it has no apply_patch and edits with its shell."""
    run, lines, gw = await edit_through_the_gateway(tmp_path, provider=Provider.OPENAI)

    assert (tmp_path / "codex" / "work" / "hello.txt").read_text() == "Hello from the shell\n"
    (command,) = run.items("command_execution")
    assert SHELL_EDIT in command["command"] and command["exit_code"] == 0
    tools = current_user_message(gw.sim.requests[0].body)["userInputMessageContext"]["tools"]
    assert "apply_patch" not in {tool["toolSpecification"]["name"] for tool in tools}
    turns = [line for line in lines if line.message.startswith("POST /v1/responses")]
    assert [(line.extra["status"], line.extra.get("transport")) for line in turns] == [(200, "websocket")] * 2
    assert not any(line.message.startswith("GET /v1/models") for line in lines)
