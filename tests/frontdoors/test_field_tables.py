"""Every request field of the installed SDKs is in its door's field table (q2api.frontdoors.field_table).

A field in none of the four classes (honoured, emulated, ignored, refused) fails here: the next
SDK release tells us what it added before a client finds out.
"""

from __future__ import annotations

from typing import Any

import anthropic.types
import anthropic.types.beta
import openai.types.chat
import openai.types.responses
import orjson
import pytest

from q2api.anthropic.errors import InvalidRequest
from q2api.conversion.claude_converter import convert_claude_request
from q2api.frontdoors.chat.fields import CHAT_FIELDS
from q2api.frontdoors.claude import CLAUDE_DOOR
from q2api.frontdoors.claude.fields import CLAUDE_FIELDS
from q2api.frontdoors.field_table import FieldTable, Treatment
from q2api.frontdoors.responses.fields import RESPONSES_FIELDS
from tests.support.converter_helpers import table_options
from tests.support.sdk_shapes import sdk_fields

CLAUDE_ROOTS = (
    anthropic.types.MessageCreateParams,
    anthropic.types.MessageCountTokensParams,
    anthropic.types.beta.MessageCreateParams,
    anthropic.types.beta.MessageCountTokensParams,
)


def unclassified(table: FieldTable, roots: tuple[Any, ...]) -> list[str]:
    def descend_shape(shape: str) -> bool:
        known = table.shape(shape)
        return known is None or known.rule is None

    def descend_field(shape: str, field: str) -> bool:
        rule = table.rule(shape, field)
        return rule is None or rule.treatment in (Treatment.HONOURED, Treatment.EMULATED)

    missing = []
    for root in roots:
        for shape, field in sdk_fields(root, descend_shape=descend_shape, descend_field=descend_field):
            if table.shape(shape) is None:
                missing.append(f"{shape} (the whole shape)")
            elif field and table.rule(shape, field) is None:
                missing.append(f"{shape}.{field}")
    return sorted(set(missing))


CHAT_ROOTS = (openai.types.chat.CompletionCreateParams,)
RESPONSES_ROOTS = (openai.types.responses.ResponseCreateParams,)


@pytest.mark.parametrize(
    ("table", "roots"),
    [(CLAUDE_FIELDS, CLAUDE_ROOTS), (CHAT_FIELDS, CHAT_ROOTS), (RESPONSES_FIELDS, RESPONSES_ROOTS)],
    ids=["claude", "chat", "responses"],
)
def test_every_sdk_field_is_classified(table: FieldTable, roots: tuple[Any, ...]) -> None:
    assert unclassified(table, roots) == []


# -- the Claude door refuses what its table refuses ------------------------------------------

_IMAGE = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
_USER = {"role": "user", "content": "hi"}


def _with_blocks(*blocks: dict[str, Any], role: str = "assistant") -> dict[str, Any]:
    return {"messages": [_USER, {"role": role, "content": list(blocks)}, _USER]}


def _with_tool(tool: dict[str, Any]) -> dict[str, Any]:
    return {"tools": [tool]}


# One request per refused row of the table: (the fields to add to a minimal request, the path the 400 names).
CLAUDE_REFUSALS: dict[str, tuple[dict[str, Any], str]] = {
    "MessageCreateParams.container": ({"container": "container_01"}, "container"),
    "MessageCreateParams.mcp_servers": (
        {"mcp_servers": [{"type": "url", "url": "https://x", "name": "x"}]},
        "mcp_servers",
    ),
    "MessageCreateParams.thread": ({"thread": {"type": "create"}}, "thread"),
    "URLImageSourceParam": ({"messages": [{"role": "user", "content": [_IMAGE]}]}, "messages.0.content.0.source"),
    "FileImageSourceParam": (
        {"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}]},
        "messages.0.content.0.source",
    ),
    "URLPDFSourceParam": (
        {
            "messages": [
                {"role": "user", "content": [{"type": "document", "source": {"type": "url", "url": "https://x"}}]}
            ]
        },
        "messages.0.content.0.source",
    ),
    "FileDocumentSourceParam": (
        {"messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "file", "file_id": "f"}}]}]},
        "messages.0.content.0.source",
    ),
    "ContainerUploadBlockParam": (
        _with_blocks({"type": "container_upload", "file_id": "f"}, role="user"),
        "messages.1.content.0.type",
    ),
    "MCPToolUseBlockParam": (
        _with_blocks({"type": "mcp_tool_use", "id": "m", "name": "n", "server_name": "s", "input": {}}),
        "messages.1.content.0.type",
    ),
    "RequestMCPToolResultBlockParam": (
        _with_blocks({"type": "mcp_tool_result", "tool_use_id": "m"}, role="user"),
        "messages.1.content.0.type",
    ),
    "MCPToolListingBlockParam": (
        _with_blocks({"type": "mcp_tool_listing", "mcp_server_name": "s", "tools": []}),
        "messages.1.content.0.type",
    ),
    "AdvisorToolResultBlockParam": (
        _with_blocks({"type": "advisor_tool_result", "tool_use_id": "a", "content": {}}),
        "messages.1.content.0.type",
    ),
    "BrowserStateBlockParam": (
        _with_blocks({"type": "browser_state", "tabs": []}, role="user"),
        "messages.1.content.0.type",
    ),
    "RequestToolAdditionBlockParam": (
        _with_blocks({"type": "tool_addition", "tool": {}}, role="system"),
        "messages.1.content.0.type",
    ),
    "RequestToolRemovalBlockParam": (
        _with_blocks({"type": "tool_removal", "tool": {}}, role="system"),
        "messages.1.content.0.type",
    ),
    "CodeExecutionTool20250825Param": (
        _with_tool({"type": "code_execution_20250825", "name": "code_execution"}),
        "tools.0.type",
    ),
    "WebFetchTool20250910Param": (_with_tool({"type": "web_fetch_20250910", "name": "web_fetch"}), "tools.0.type"),
    "ToolComputerUse20251124Param": (
        _with_tool({"type": "computer_20251124", "name": "computer", "display_width_px": 1, "display_height_px": 1}),
        "tools.0.type",
    ),
    "BrowserToolset20260801Param": (
        _with_tool({"type": "browser_toolset_20260801", "name": "browser"}),
        "tools.0.type",
    ),
    "MCPToolsetParam": (_with_tool({"type": "mcp_toolset", "mcp_server_name": "s"}), "tools.0.type"),
    "AdvisorTool20260301Param": (
        _with_tool({"type": "advisor_20260301", "name": "advisor", "model": "m"}),
        "tools.0.type",
    ),
}


def _claude_refused_rows() -> set[str]:
    rows = {f"{shape}.{field}" for shape, field in CLAUDE_FIELDS.refused_fields()}
    rows |= {
        shape.name
        for shape in CLAUDE_FIELDS.shapes
        if shape.rule is not None and shape.rule.treatment is Treatment.REFUSED
    }
    return rows


def test_every_refusal_of_the_claude_table_has_its_request_here() -> None:
    assert set(CLAUDE_REFUSALS) == _claude_refused_rows()


@pytest.mark.parametrize(("row", "case"), sorted(CLAUDE_REFUSALS.items()), ids=sorted(CLAUDE_REFUSALS))
def test_the_claude_door_refuses_each_by_name(row: str, case: tuple[dict[str, Any], str]) -> None:
    extra, path = case
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [_USER], **extra}
    with pytest.raises(InvalidRequest) as caught:
        call = CLAUDE_DOOR.read(orjson.dumps(body))
        convert_claude_request(call.request, table_options())  # images and documents are refused while converted
    assert caught.value.path == path
    known = CLAUDE_FIELDS.rule(*row.split(".")) if "." in row else CLAUDE_FIELDS.shape(row).rule  # type: ignore[union-attr]
    assert known is not None
    if "source" not in path:  # a source is refused by the converter, which says it in its own words
        assert known.note in caught.value.message
