"""Claude `tools` → the Amazon Q `tools` of the current message.

Amazon Q rules (docs/protocol.md#request-body, docs/protocol.md#conversation-rules): names of 1..64 `[a-zA-Z0-9_-]` characters, descriptions
of 1..10,240 characters, a JSON-schema document without nulls, and every tool name used in
history present in the list. Anthropic's web search server tool becomes a `web_search` tool the
server runs (q2api.conversion.web_search); other server tools (`bash_20250124`, …) cannot run on
Amazon Q and are dropped with a report; `tool_choice: none` sends no real tool at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import orjson

from q2api.amazonq import types as q
from q2api.amazonq.types import MAX_TOOL_DESCRIPTION_LENGTH
from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import Tool, ToolChoice
from q2api.conversion.anthropic_tools import anthropic_tool
from q2api.conversion.identifiers import Identifiers
from q2api.conversion.json_clean import cleaned_schema
from q2api.conversion.report import Finding, FindingKind
from q2api.conversion.system_context import full_tool_description
from q2api.conversion.tool_schemas import object_root_schema
from q2api.conversion.web_search import WEB_SEARCH_TOOL, options_of, web_search_spec

_TRUNCATION_NOTE = "\n… [truncated: the full description is in the conversation context]"
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


# A tool name in the history is the client's and may be any length (an offered tool's is at most 64
# characters, but a history's tool_use names a tool no longer offered): a placeholder's description
# names at most this much of it, so that it stays within Amazon Q's description limit.
_NAME_IN_DESCRIPTION = 200


def placeholder_description(name: str) -> str:
    return f"The {_shown_name(name)} tool."


def _shown_name(name: str) -> str:
    return name if len(name) <= _NAME_IN_DESCRIPTION else name[:_NAME_IN_DESCRIPTION] + "…"


def tool_specs(
    tools: list[Tool] | None,
    tool_choice: ToolChoice | None,
    history_tool_names: Mapping[str, str],
    ids: Identifiers,
    report: list[Finding],
    context_sections: list[str],
) -> list[q.Tool]:
    """The tool list; full texts of truncated descriptions are appended to `context_sections`."""
    specs: list[q.Tool] = []
    # Amazon Q compares tool names without regard to case (kiro.rs found `Read` and `read` to be
    # one tool upstream): names are matched case-folded, Amazon Q name -> the client's name.
    offered: dict[str, str] = {}
    if tool_choice is not None and tool_choice.type == "none":
        if tools:
            report.append(Finding(FindingKind.TOOL_CHOICE_NONE, detail=f"{len(tools)} tool(s) not offered upstream"))
        tools = None
    elif tool_choice is not None and (tool_choice.type in ("any", "tool") or tool_choice.disable_parallel_tool_use):
        # Amazon Q has no way to force a tool or forbid parallel calls: the model chooses freely.
        wanted = f"tool {tool_choice.name!r}" if tool_choice.type == "tool" else f"tool_choice {tool_choice.type!r}"
        if tool_choice.disable_parallel_tool_use:
            wanted += " with disable_parallel_tool_use"
        report.append(
            Finding(
                FindingKind.TOOL_CHOICE_IGNORED,
                detail=f"{wanted} cannot be enforced upstream; asked of the model in the current message",
            )
        )
    for index, offered_tool in enumerate(tools or ()):
        described = anthropic_tool(offered_tool.type) if offered_tool.is_server_tool and offered_tool.type else None
        tool = (
            msgspec.structs.replace(
                offered_tool, description=offered_tool.description or described[0], input_schema=described[1]
            )
            if described is not None
            else offered_tool
        )
        if tool.is_web_search and WEB_SEARCH_TOOL.casefold() not in offered:
            specs.append(web_search_spec(options_of(tool)))
            offered[WEB_SEARCH_TOOL.casefold()] = tool.name
            continue
        if tool.is_server_tool:
            report.append(
                Finding(
                    FindingKind.SERVER_TOOL_DROPPED,
                    detail=f"tools.{index}: {tool.name} ({tool.type}) runs only on Anthropic's servers",
                )
            )
            continue
        if tool.input_schema is None:
            raise InvalidRequest(f"tools.{index}.input_schema", "Field required (custom tools need an input_schema)")
        name = ids.tool_name(tool.name)
        same = offered.get(name.casefold())
        if same is not None:
            twice = "is listed twice" if same == tool.name else f"differs from {same} only by case"
            report.append(Finding(FindingKind.DUPLICATE_TOOL_DROPPED, detail=f"tools.{index}: {tool.name} {twice}"))
            continue
        offered[name.casefold()] = tool.name
        schema, cleaned = cleaned_schema(tool.input_schema)
        if cleaned:
            report.append(Finding(FindingKind.TOOL_SCHEMA_CLEANED, detail=f"tools.{index}: null values removed"))
        schema, root_change = object_root_schema(schema)
        if root_change is not None:
            detail = f"tools.{index}: {tool.name}: {root_change}"
            report.append(Finding(FindingKind.TOOL_SCHEMA_OBJECT_ROOT, detail=detail))
        specs.append(_spec(name, _description(tool, index, report, context_sections), schema))
    for name, client_name in history_tool_names.items():
        offered_as = offered.get(name.casefold())
        if offered_as is not None:
            if offered_as != client_name:
                # One tool to Amazon Q: a call the model makes by the history's spelling reaches the
                # client by the name its tool list gives.
                ids.tool_names[name] = offered_as
                report.append(
                    Finding(
                        FindingKind.TOOL_NAME_CASE_MERGED,
                        detail=f"{client_name} in history is the tool {offered_as} (Amazon Q ignores case)",
                    )
                )
            continue
        report.append(
            Finding(
                FindingKind.HISTORY_TOOL_PLACEHOLDER,
                detail=f"{client_name} is used in history but not offered; a placeholder spec was added",
            )
        )
        description = f"The {_shown_name(client_name)} tool, used earlier in this conversation; it is not offered in this request."
        specs.append(_spec(name, description, _EMPTY_SCHEMA))
        offered[name.casefold()] = client_name
    return specs


def tool_choice_instruction(tool_choice: ToolChoice | None) -> str | None:
    """What the current message asks of the model for a `tool_choice` Amazon Q cannot enforce (None: nothing)."""
    if tool_choice is None or tool_choice.type == "none":
        return None
    asks = []
    if tool_choice.type == "any":
        asks.append("Call one of your tools in this reply.")
    elif tool_choice.type == "tool" and tool_choice.name:
        asks.append(f"Call the tool {tool_choice.name} in this reply.")
    if tool_choice.disable_parallel_tool_use:
        asks.append("Call at most one tool in this reply.")
    return " ".join(asks) or None


def _spec(name: str, description: str, schema: dict[str, Any]) -> q.Tool:
    return {"toolSpecification": {"name": name, "description": description, "inputSchema": {"json": schema}}}


def _description(tool: Tool, index: int, report: list[Finding], context_sections: list[str]) -> str:
    description = tool.description or ""
    if tool.input_examples:
        examples = "\n".join(orjson.dumps(example).decode() for example in tool.input_examples)
        description = f"{description}\n\nExamples of input:\n{examples}".lstrip()
    if not description.strip():
        report.append(Finding(FindingKind.TOOL_DESCRIPTION_PLACEHOLDER, detail=f"tools.{index}: {tool.name}"))
        return placeholder_description(tool.name)
    if len(description) <= MAX_TOOL_DESCRIPTION_LENGTH:
        return description
    report.append(
        Finding(
            FindingKind.TOOL_DESCRIPTION_TRUNCATED,
            detail=f"tools.{index}: {tool.name} ({len(description)} chars); the full text is in the context",
        )
    )
    context_sections.append(full_tool_description(tool.name, description))
    return description[: MAX_TOOL_DESCRIPTION_LENGTH - len(_TRUNCATION_NOTE)] + _TRUNCATION_NOTE
