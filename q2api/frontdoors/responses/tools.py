"""Responses tools → Claude tools, and `tool_choice`. Pure.

Function tools become Claude tools; custom (freeform) tools become Claude tools whose input is one
string (custom_tools.py); the tools of Codex's `namespace` tools too, named `namespace__name` on
the Claude side and given back to the client under both names (`ToolName`). The hosted web search
becomes the Claude door's web search tool (web_search.py); OpenAI's other hosted tools
(`file_search`, `code_interpreter`, …) are refused: Amazon Q runs none of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from q2api.anthropic.types import Tool, ToolChoice
from q2api.frontdoors.responses.custom_tools import claude_custom_tool
from q2api.frontdoors.responses.depth import refuse_too_deep
from q2api.frontdoors.responses.web_search import claude_web_search_tool, web_search_choice, web_search_origins
from q2api.openai.errors import InvalidChatRequest
from q2api.openai.responses_types import (
    CustomTool,
    FunctionTool,
    NamespaceTool,
    ResponsesRequest,
    WebSearchTool,
    read_tool,
)

_EMPTY_SCHEMA = {"type": "object", "properties": {}}
NAMESPACE_SEPARATOR = "__"


@dataclass(frozen=True, slots=True)
class ToolName:
    """A tool as the client named it (a function of a namespace carries both names); `custom`: a
    custom tool, whose calls are `custom_tool_call` items with one input string."""

    name: str
    namespace: str | None = None
    custom: bool = False


def claude_tool_name(name: str, namespace: str | None) -> str:
    return f"{namespace}{NAMESPACE_SEPARATOR}{name}" if namespace else name


def claude_tools(responses: ResponsesRequest) -> tuple[list[Tool], dict[str, ToolName], dict[str, str]]:
    tools: list[Tool] = []
    names: dict[str, ToolName] = {}
    origins: dict[str, str] = {}

    def add(tool: FunctionTool | CustomTool, namespace: str | None, origin: str) -> None:
        name = claude_tool_name(tool.name, namespace)
        origins[f"tools.{len(tools)}"] = origin
        if isinstance(tool, CustomTool):
            names[name] = ToolName(tool.name, namespace, custom=True)
            tools.append(claude_custom_tool(tool, name))
            return
        names[name] = ToolName(tool.name, namespace)
        schema = tool.parameters or dict(_EMPTY_SCHEMA)
        refuse_too_deep(schema, f"{origin}.parameters")
        tools.append(Tool(name=name, input_schema=schema, description=tool.description, strict=tool.strict))

    for index, raw in enumerate(responses.tools or ()):
        where = f"tools[{index}]"
        tool = read_tool(raw, where)
        if isinstance(tool, FunctionTool | CustomTool):
            add(tool, None, where)
        elif isinstance(tool, NamespaceTool):
            for number, inner_raw in enumerate(tool.tools):
                inner_where = f"{where}.tools[{number}]"
                inner = read_tool(inner_raw, inner_where)
                if not isinstance(inner, FunctionTool | CustomTool):
                    raise InvalidChatRequest(f"{inner_where}.type", "a namespace holds function and custom tools only")
                add(inner, tool.name, inner_where)
        elif isinstance(tool, WebSearchTool):
            origins.update(web_search_origins(tool, f"tools.{len(tools)}", where))
            tools.append(claude_web_search_tool(tool))
        else:
            raise InvalidChatRequest(
                f"{where}.type",
                f"hosted tool {tool.type!r} is not supported: the Amazon Q backend runs none of OpenAI's hosted "
                "tools but web search; the client runs function and custom tools itself.",
                code="unsupported_tool",
            )
    return tools, names, origins


def claude_tool_choice(
    responses: ResponsesRequest, names: Mapping[str, ToolName], tools: Sequence[Tool] = ()
) -> ToolChoice | None:
    choice = responses.tool_choice
    no_parallel = True if responses.parallel_tool_calls is False else None
    if choice is None:
        return ToolChoice(type="auto", disable_parallel_tool_use=True) if no_parallel else None
    if isinstance(choice, str):
        mode = {"auto": "auto", "none": "none", "required": "any"}[choice]
        return ToolChoice(type=mode, disable_parallel_tool_use=no_parallel)  # type: ignore[arg-type]
    kind = choice.get("type")
    if isinstance(kind, str):
        offered = any(tool.is_web_search for tool in tools)
        search = web_search_choice(kind, offered, no_parallel)
        if search is not None:
            return search
    if kind not in ("function", "custom"):
        raise InvalidChatRequest(
            "tool_choice.type",
            f"{kind!r} is not supported: tool_choice takes auto, none, required, a function or custom tool by "
            "name, or web search",
        )
    name = choice.get("name")
    namespace = choice.get("namespace")
    claude_name = claude_tool_name(name, namespace) if isinstance(name, str) else None
    chosen = names.get(claude_name) if claude_name is not None else None
    if chosen is None or chosen.custom != (kind == "custom"):
        raise InvalidChatRequest("tool_choice.name", f"{name!r} is not one of the request's {kind} tools")
    return ToolChoice(type="tool", name=claude_name, disable_parallel_tool_use=no_parallel)
