"""The real Claude Code CLI's WebSearch tool through the gateway, against the simulated Amazon Q.

Claude Code (`-p` print mode, pinned version, installed by tests/support/cli_clients.py, offline
but for the gateway) asks its model; the simulated model calls Claude Code's WebSearch tool;
Claude Code then sends the gateway its own search request (only the web search server tool, the
query in the message); the gateway runs Kiro's MCP search and the model writes the search's
answer; Claude Code hands that back to its model as the tool result, and the final answer quotes
it. Skipped, saying why, where npm or the install is unavailable.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from q2api.testing import scripts
from q2api.testing.recorded_requests import RecordedRequest
from q2api.testing.scripts import Reply
from q2api.testing.simulated_mcp import search_results
from tests.support.cli_clients import claude_code, run_claude_code
from tests.support.gateway_harness import CLIENT_KEY, open_gateway

QUERY = "q2api gateway release notes"


def _current(body: dict[str, Any]) -> dict[str, Any]:
    return body["conversationState"]["currentMessage"]["userInputMessage"]


def claude_code_model(record: RecordedRequest) -> Reply | None:
    """The simulated model's side of the conversation (None: the simulator's plain echo)."""
    body = record.body
    context = _current(body).get("userInputMessageContext", {})
    offered = [tool["toolSpecification"]["name"] for tool in context.get("tools", []) if "toolSpecification" in tool]
    results = context.get("toolResults", [])
    history = body["conversationState"].get("history", [])
    last_uses = history[-1].get("assistantResponseMessage", {}).get("toolUses", []) if history else []
    if results and any(use["name"] == "web_search" for use in last_uses):
        # Claude Code's search request, continued by the gateway with the search's results.
        found = results[0]["content"][0]["text"]
        return scripts.text_reply(f"Search summary: {found[:400]}", chunks=4)
    if results:
        said = results[0]["content"][0]["text"] if results[0]["content"] else ""
        return scripts.text_reply(f"FINAL ANSWER based on the web: {said[:600]}", chunks=4)
    if "WebSearch" in offered:
        return scripts.tool_reply("WebSearch", {"query": QUERY}, tool_use_id="tooluse_websearch_1")
    return None


async def test_claude_codes_websearch_tool_works_through_the_gateway(tmp_path: Path) -> None:
    binary = claude_code()
    async with open_gateway(tmp_path / "gateway", Q2API_STREAM_HOLD_SECONDS="0") as gw:
        gw.sim.responder = claude_code_model
        done = await asyncio.to_thread(
            run_claude_code,
            binary,
            gw.base_url,
            prompt="Search the web for the q2api gateway release notes and tell me what you find.",
            home=tmp_path / "home",
            api_key=CLIENT_KEY,
            model="claude-sonnet-5-5",
            allowed_tools=["WebSearch"],
            # Claude Code 2.1 defers most tools behind ToolSearch (tool_reference loading); with it off,
            # WebSearch is offered in `tools` directly, as older versions and most set-ups have it.
            env={"ENABLE_TOOL_SEARCH": "false"},
        )
        assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
        result = json.loads(done.stdout)
        assert result["is_error"] is False, result
        # The search ran once, through Kiro's MCP call, with the query the model chose.
        assert gw.sim.mcp.queries == [QUERY]
        # Claude Code's search request reached the gateway as a server-tool request and was answered
        # without asking the model what to search.
        searches = [
            record
            for record in gw.sim.requests
            if any(
                use["name"] == "web_search"
                for entry in record.body["conversationState"].get("history", [])
                for use in entry.get("assistantResponseMessage", {}).get("toolUses", [])
            )
        ]
        assert len(searches) == 1
        # What the search found travelled back to the model as WebSearch's result, and into the answer.
        first_url = search_results(QUERY)[0]["url"]
        assert result["result"].startswith("FINAL ANSWER based on the web:")
        assert first_url in result["result"] or "example1.test" in result["result"]
