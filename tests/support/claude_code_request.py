"""A generator of Claude Code-shaped `/v1/messages` bodies (docs/protocol.md#what-real-clients-send).

    body = claude_code_request(size_kb=200)   # a dict; orjson.dumps(body) is the wire body

What it holds, like Claude Code 2.1.x: three system blocks (two with `cache_control`),
`role: "system"` turns (one with empty content and a per-message `output_config`),
`thinking: {"type": "adaptive"}`, `output_config`, `context_management`, `metadata.user_id`
(a JSON string), `max_tokens` 128000, `stream: true`, 22 tools with draft 2020-12 schemas and
`additionalProperties: false` (one with `defer_loading: true`, one MCP tool whose name is 70
characters long), and tool rounds (thinking + text + parallel tool_use, then tool_result turns
with system reminders) until the body reaches `size_kb`. Deterministic: same arguments, same body.
Shared by the converter tests, end-to-end tests and benchmarks.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

MCP_TOOL_NAME = "mcp__claude_in_chrome_extension__browser_navigate_to_url_and_wait_for2"
assert len(MCP_TOOL_NAME) == 70
DEFERRED_TOOL_NAME = "NotebookEdit"
SCHEMA_DRAFT = "https://json-schema.org/draft/2020-12/schema"

_BUILTIN_TOOLS = [
    (
        "Task",
        "Launch a new agent to handle complex, multi-step tasks autonomously.",
        {
            "description": "A short description of the task",
            "prompt": "The task for the agent to perform",
            "subagent_type": "The type of specialized agent to use",
        },
    ),
    (
        "Bash",
        "Executes a given bash command in a persistent shell session with optional timeout.",
        {"command": "The command to execute", "description": "Clear, concise description of what this command does"},
    ),
    (
        "Glob",
        "Fast file pattern matching tool that works with any codebase size.",
        {"pattern": "The glob pattern to match files against", "path": "The directory to search in"},
    ),
    (
        "Grep",
        "A powerful search tool built on ripgrep.",
        {
            "pattern": "The regular expression pattern",
            "path": "File or directory to search in",
            "glob": "Glob pattern to filter files",
        },
    ),
    (
        "ExitPlanMode",
        "Use this tool when you are in plan mode and have finished presenting your plan.",
        {"plan": "The plan you came up with"},
    ),
    (
        "Read",
        "Reads a file from the local filesystem.",
        {
            "file_path": "The absolute path to the file to read",
            "offset": "The line number to start reading from",
            "limit": "The number of lines to read",
        },
    ),
    (
        "Edit",
        "Performs exact string replacements in files.",
        {
            "file_path": "The absolute path to the file to modify",
            "old_string": "The text to replace",
            "new_string": "The text to replace it with",
        },
    ),
    (
        "Write",
        "Writes a file to the local filesystem.",
        {"file_path": "The absolute path to the file to write", "content": "The content to write to the file"},
    ),
    (
        DEFERRED_TOOL_NAME,
        "Completely replaces the contents of a specific cell in a Jupyter notebook.",
        {"notebook_path": "The absolute path to the notebook", "new_source": "The new source for the cell"},
    ),
    (
        "WebFetch",
        "Fetches content from a specified URL and processes it using an AI model.",
        {"url": "The URL to fetch content from", "prompt": "The prompt to run on the fetched content"},
    ),
    (
        "TodoWrite",
        "Use this tool to create and manage a structured task list for your current coding session.",
        {"todos": "The updated todo list"},
    ),
    (
        "WebSearch",
        "Allows Claude to search the web and use the results to inform responses.",
        {"query": "The search query to use"},
    ),
    (
        "BashOutput",
        "Retrieves output from a running or completed background bash shell.",
        {"bash_id": "The ID of the background shell"},
    ),
    (
        "KillShell",
        "Kills a running background bash shell by its ID.",
        {"shell_id": "The ID of the background shell to kill"},
    ),
    (
        "SlashCommand",
        "Execute a slash command within the main conversation.",
        {"command": "The slash command to execute with its arguments"},
    ),
    ("Skill", "Execute a skill within the main conversation.", {"skill": "The skill name"}),
    (
        "AskUserQuestion",
        "Use this tool when you need to ask the user questions during execution.",
        {"questions": "Questions to ask the user"},
    ),
    (
        "ListMcpResourcesTool",
        "List available resources from configured MCP servers.",
        {"server": "Optional server name to filter resources by"},
    ),
    (
        "ReadMcpResourceTool",
        "Reads a specific resource from an MCP server.",
        {"server": "The MCP server name", "uri": "The resource URI to read"},
    ),
    (
        "mcp__github__create_pull_request",
        "Create a new pull request in a GitHub repository.",
        {
            "owner": "Repository owner",
            "repo": "Repository name",
            "title": "PR title",
            "head": "Branch with changes",
            "base": "Target branch",
        },
    ),
    (
        "mcp__github__get_issue",
        "Get details of a specific issue in a GitHub repository.",
        {"owner": "Repository owner", "repo": "Repository name", "issue_number": "The issue number"},
    ),
    (
        MCP_TOOL_NAME,
        "Navigate the browser to a URL and wait until the page has loaded.",
        {"url": "The URL to open", "timeout_ms": "How long to wait"},
    ),
]

_USAGE_NOTES = "\n\nUsage notes:\n" + "\n".join(
    f"- Note {n}: prefer dedicated tools over shell commands; quote paths with spaces; "
    "never run destructive commands without confirmation; keep outputs short and precise."
    for n in range(12)
)


def claude_code_tools() -> list[dict[str, Any]]:
    tools = []
    for name, description, fields in _BUILTIN_TOOLS:
        properties: dict[str, Any] = {}
        for field_name, field_description in fields.items():
            if field_name in ("offset", "limit", "timeout_ms", "issue_number"):
                properties[field_name] = {"type": "number", "description": field_description}
            elif field_name in ("todos", "questions"):
                properties[field_name] = {
                    "type": "array",
                    "description": field_description,
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "minLength": 1},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                        },
                        "required": ["content", "status"],
                        "additionalProperties": False,
                    },
                }
            else:
                properties[field_name] = {"type": "string", "description": field_description}
        tool: dict[str, Any] = {
            "name": name,
            "description": description + _USAGE_NOTES,
            "input_schema": {
                "$schema": SCHEMA_DRAFT,
                "type": "object",
                "properties": properties,
                "required": list(fields)[:1],
                "additionalProperties": False,
            },
        }
        if name == DEFERRED_TOOL_NAME:
            tool["defer_loading"] = True
        tools.append(tool)
    return tools


def _system_blocks() -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.0; cc_entrypoint=cli"},
        {
            "type": "text",
            "text": "You are Claude Code, Anthropic's official CLI for Claude.",
            "cache_control": {"type": "ephemeral"},
        },
        {
            "type": "text",
            "text": "You are an interactive CLI tool that helps users with software engineering tasks.\n"
            + "\n".join(
                f"# Section {n}\nFollow the conventions of the codebase; verify with tests." for n in range(40)
            ),
            "cache_control": {"type": "ephemeral"},
        },
    ]


def _reminder(text: str) -> dict[str, Any]:
    return {"type": "text", "text": f"<system-reminder>\n{text}\n</system-reminder>"}


def _round(number: int) -> list[dict[str, Any]]:
    """One agent step: the assistant thinks, says something, calls two tools in parallel;
    the user turn returns both results with a reminder."""
    read_id, grep_id = f"toolu_{number:04d}read", f"toolu_{number:04d}grep"
    file_body = "\n".join(
        f"{line:4d}  def function_{number}_{line}(value):  return value * {line}" for line in range(60)
    )
    return [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": f"Step {number}: I should read the module and search for callers.",
                    "signature": "EqQB" + "s" * 40,
                },
                {"type": "text", "text": f"Let me look at module_{number}.py and its callers."},
                {
                    "type": "tool_use",
                    "id": read_id,
                    "name": "Read",
                    "input": {"file_path": f"/repo/src/module_{number}.py"},
                },
                {
                    "type": "tool_use",
                    "id": grep_id,
                    "name": "Grep",
                    "input": {"pattern": f"function_{number}_", "path": "/repo"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": read_id, "content": file_body},
                {
                    "type": "tool_result",
                    "tool_use_id": grep_id,
                    "content": [{"type": "text", "text": f"/repo/src/caller_{number}.py:12: function_{number}_3(x)"}],
                },
                _reminder("The TodoWrite tool hasn't been used recently. Consider using it to track progress."),
            ],
        },
    ]


def claude_code_request(size_kb: int = 60, *, model: str = "claude-opus-5-5") -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "", "output_config": {"effort": "high"}},
        {
            "role": "user",
            "content": [
                _reminder(
                    "As you answer the user's questions, you can use the following context:\n# claudeMd\nRun tests with pytest."
                ),
                {
                    "type": "text",
                    "text": "Find every caller of the helpers and add type annotations.",
                    "cache_control": {"type": "ephemeral"},
                },
            ],
        },
        {"role": "system", "content": "<env>\nWorking directory: /repo\nPlatform: linux\n</env>"},
    ]
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": 128000,
        "stream": True,
        "system": _system_blocks(),
        "messages": messages,
        "tools": claude_code_tools(),
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "metadata": {
            "user_id": json.dumps(
                {"device_id": "d" * 64, "account_uuid": "", "session_id": "5f1c6c1e-0000-4000-8000-000000000000"}
            )
        },
    }
    target = size_kb * 1024
    number = 0
    size = len(orjson.dumps(body))
    while size < target:
        number += 1
        step = _round(number)
        messages.extend(step)
        size += len(orjson.dumps(step))
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "I found every caller."}]})
    messages.append({"role": "user", "content": "Thanks. Now run the test suite."})
    return body
