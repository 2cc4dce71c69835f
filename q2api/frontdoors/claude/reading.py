"""Reading a Claude request at its door: the field table's refusals, fields no type knows, the billing line.

    request, breakpoints = read_claude_request(body)

* Refused by the table (q2api.frontdoors.claude.fields): a field (`container`, `mcp_servers`,
  `thread`), a tool type (code execution, web fetch, computer and browser use, MCP toolsets, the
  advisor, or a type the gateway does not know), a block type (`container_upload`, the MCP and
  advisor blocks, tool changes): a 400 naming it and saying what to do instead.
* A field no request type declares (a client newer than the gateway) is taken out by the parser
  and named here in a WARNING, once per field per process (later requests at DEBUG): reported,
  never dropped unseen.
* Claude Code's `x-anthropic-billing-header: …` line, the first of the first system block, is
  removed before anything else reads the system prompt: its `cch` value changes per turn, and
  sent upstream inside the text the first cache point covers it would defeat the cache. Logged
  at DEBUG.
"""

from __future__ import annotations

import re

import msgspec
from loguru import logger

from q2api.anthropic.cache_control import CacheBreakpoints
from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import (
    MCP_TOOLSET,
    ContainerUploadBlock,
    CountTokensRequest,
    MessagesRequest,
    read_count_tokens_request,
    read_messages_request,
)
from q2api.frontdoors.claude.fields import CLAUDE_FIELDS
from q2api.frontdoors.field_table import report_unknown_fields
from q2api.frontdoors.json_numbers import refuse_unwritable_integer

BILLING_HEADER = "x-anthropic-billing-header:"

# Tool `type`s the door refuses, by prefix → the table's shape that says why.
REFUSED_TOOL_TYPES = {
    "code_execution_": "CodeExecutionTool20250825Param",
    "web_fetch_": "WebFetchTool20250910Param",
    "computer_": "ToolComputerUse20251124Param",
    "browser_": "BrowserToolset20260801Param",
    MCP_TOOLSET: "MCPToolsetParam",
    "advisor_": "AdvisorTool20260301Param",
}
# Anthropic tool types the gateway serves (emulates or ignores), by prefix; any other type is refused.
SERVED_TOOL_TYPES = ("custom", "web_search_", "bash_", "text_editor_", "memory_", "tool_search_tool_")
# Block `type`s the door refuses → the table's shape that says why. `container_upload` parses; the
# others are not request types of the parser, whose "invalid value" the door turns into the refusal.
REFUSED_BLOCK_TYPES = {
    "container_upload": "ContainerUploadBlockParam",
    "mcp_tool_use": "MCPToolUseBlockParam",
    "mcp_tool_result": "RequestMCPToolResultBlockParam",
    "mcp_tool_listing": "MCPToolListingBlockParam",
    "advisor_tool_result": "AdvisorToolResultBlockParam",
    "browser_state": "BrowserStateBlockParam",
    "tool_addition": "RequestToolAdditionBlockParam",
    "tool_removal": "RequestToolRemovalBlockParam",
}
# Top-level fields the door refuses when present.
REFUSED_FIELDS = ("container", "mcp_servers", "thread")

_INVALID_TAG = re.compile(r"^Invalid value '(?P<tag>[^']*)'$")


def read_claude_request(body: bytes) -> tuple[MessagesRequest, CacheBreakpoints]:
    """The request and its cache breakpoints, or the 400 that names what cannot be served."""
    try:
        read = read_messages_request(body)
    except InvalidRequest as error:
        raise _block_refusal(error) or error from None
    refuse_unwritable_integer(body)
    report_unknown_fields(read.unknown_fields)
    refuse(read.request)
    return without_billing_header(read.request, read.breakpoints)


def read_count_tokens(body: bytes) -> CountTokensRequest:
    try:
        request, unknown = read_count_tokens_request(body)
    except InvalidRequest as error:
        raise _block_refusal(error) or error from None
    refuse_unwritable_integer(body)
    report_unknown_fields(unknown)
    refuse(request)
    return request


def refuse(request: MessagesRequest | CountTokensRequest) -> None:
    """The table's refusals of fields, tool types and parsed block types; raises InvalidRequest."""
    for name in REFUSED_FIELDS:
        if getattr(request, name, None) is not None:
            raise InvalidRequest(name, _why(CLAUDE_FIELDS.rule("MessageCreateParams", name)))
    for index, tool in enumerate(request.tools or ()):
        kind = tool.type
        if kind is None or kind == "custom":
            continue
        shape = next((shape for prefix, shape in REFUSED_TOOL_TYPES.items() if kind.startswith(prefix)), None)
        if shape is not None:
            raise InvalidRequest(f"tools.{index}.type", f"{kind!r} is not supported: {_why_shape(shape)}")
        if not kind.startswith(SERVED_TOOL_TYPES):
            raise InvalidRequest(
                f"tools.{index}.type",
                f"{kind!r} is not a tool type q2api knows: offer a client tool (no `type`, with an `input_schema`) instead",
            )
    for message_index, message in enumerate(request.messages):
        if not isinstance(message.content, list):
            continue
        for block_index, block in enumerate(message.content):
            if type(block) is ContainerUploadBlock:
                raise InvalidRequest(
                    f"messages.{message_index}.content.{block_index}.type",
                    f"'container_upload' blocks are not supported: {_why_shape(REFUSED_BLOCK_TYPES['container_upload'])}",
                )


def _block_refusal(error: InvalidRequest) -> InvalidRequest | None:
    """The parser's "invalid value" of a block type the table refuses, as that refusal."""
    match = _INVALID_TAG.match(error.problem)
    if match is None or not error.path.endswith(".type"):
        return None
    shape = REFUSED_BLOCK_TYPES.get(match["tag"])
    if shape is None:
        return None
    return InvalidRequest(error.path, f"{match['tag']!r} blocks are not supported: {_why_shape(shape)}")


def _why_shape(shape: str) -> str:
    known = CLAUDE_FIELDS.shape(shape)
    return _why(known.rule if known is not None else None)


def _why(rule: object) -> str:
    note = getattr(rule, "note", "")
    return note or "not supported by this gateway"


def without_billing_header(
    request: MessagesRequest, breakpoints: CacheBreakpoints
) -> tuple[MessagesRequest, CacheBreakpoints]:
    """`request` without Claude Code's billing line at the top of its system prompt; the
    breakpoints follow the system blocks if the first one goes."""
    system = request.system
    first = system if isinstance(system, str) else system[0].text if system else ""
    if not first.startswith(BILLING_HEADER):
        return request, breakpoints
    line_end = first.find("\n")
    rest = "" if line_end < 0 else first[line_end + 1 :]
    logger.debug(f"{BILLING_HEADER} line removed from the system prompt ({len(first) - len(rest)} characters)")
    if isinstance(system, str):
        request.system = rest or None
        return request, breakpoints
    assert isinstance(system, list)
    if rest.strip():
        request.system = [msgspec.structs.replace(system[0], text=rest), *system[1:]]
        return request, breakpoints
    request.system = system[1:] or None
    shifted = tuple(index - 1 for index in breakpoints.system if index > 0)
    return request, CacheBreakpoints(shifted, breakpoints.tools, breakpoints.messages)
