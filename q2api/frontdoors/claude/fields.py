"""`POST /v1/messages` (and `count_tokens`): every request field of the anthropic SDK, and what the gateway does with it.

The vocabulary is q2api.frontdoors.field_table's. The refusals of this table are enforced by
`refusal_of` (fields and tool types, after parsing) and `block_refusal` (block types the parser
does not know); tests/frontdoors/test_field_tables.py holds both to the table.
"""

from __future__ import annotations

from q2api.frontdoors.field_table import SCHEMA_CHECKED, FieldTable, Rule, Shape, emulated, honoured, ignored, refused

_CACHE = honoured("a prompt-cache point where the block lands (`Q2API_PROMPT_CACHE`)")
_CACHE_TTL = ignored("the lifetime of cached prefixes is Amazon Q's; the breakpoint itself is honoured")
_CALLERS = ignored("only the model calls tools through the gateway: there is no code execution to call them from")
_DEFER = ignored("every tool is offered to the model up front, deferred or not, so none is missing")
_STRICT = emulated(
    "the model's input is checked against `input_schema` before the client sees it; a mismatch gets one "
    "repair turn, then a 422 (the reply is never passed off as valid)"
)
_EXAMPLES = emulated("appended to the tool's description, where the model reads them")
_SERVER_ARTEFACT = ignored(
    "the record of a tool that ran at Anthropic, which has no Amazon Q form: left out of the conversation and "
    "reported (`server_block_dropped`)"
)
_NO_CITATIONS = ignored("Amazon Q returns no citations: the reply comes without them")
_OLD_CITATIONS = ignored("citations of an earlier reply: its text is kept, and the model needs no more to go on")
_NO_MCP = refused(
    "q2api connects to no MCP server for the client: run the MCP server in your client and offer its tools "
    "as ordinary `tools` (Claude Code does this by itself)"
)
_NO_CODE_EXECUTION = refused(
    "code execution runs in Anthropic's sandbox, which Amazon Q does not have: leave the tool out, or offer "
    "a client tool (with an `input_schema`) that runs code on your side"
)
_NO_COMPUTER = refused(
    "Amazon Q's models are not given Anthropic's computer or browser tools: define client tools with an "
    "`input_schema` for the actions your client performs"
)
_NO_WEB_FETCH = refused(
    "the gateway fetches no URL a client names: leave the tool out, or offer a client tool that fetches "
    "on your side (Claude Code's WebFetch is one)"
)
_NO_ADVISOR = refused("the advisor tool consults a second Anthropic model, which Amazon Q cannot: leave it out")
_NO_TOOL_CHANGES = refused("tool changes inside messages are not supported: change `tools` instead")
_WEB_SEARCH_FIELDS = {
    "name": honoured(),
    "allowed_domains": honoured("results outside them are dropped"),
    "blocked_domains": honoured("results inside them are dropped"),
    "user_location": honoured("told to the model with the results"),
    "max_uses": honoured("a search past it answers `max_uses_exceeded`"),
    "cache_control": _CACHE,
    "allowed_callers": _CALLERS,
    "defer_loading": _DEFER,
    "strict": ignored("the search tool's input is the gateway's own, checked when the search runs"),
    "response_inclusion": ignored("results consumed by code execution: there is none, so every result is returned"),
}


def _anthropic_tool(how: str) -> dict[str, Rule]:
    """The rows of an Anthropic-defined client tool (bash, text editor, memory) the gateway describes itself."""
    return {
        "name": emulated(how),
        "cache_control": _CACHE,
        "strict": _STRICT,
        "input_examples": _EXAMPLES,
        "allowed_callers": _CALLERS,
        "defer_loading": _DEFER,
    }


_TOOL_SCHEMA = "offered to the model as a client tool with the input schema Anthropic documents for it; the client runs it as before"

CLAUDE_FIELDS = FieldTable(
    "/v1/messages",
    [
        Shape(
            "MessageCreateParams",
            "the request",
            aliases=("MessageCreateParamsNonStreaming", "MessageCreateParamsStreaming", "MessageCountTokensParams"),
            fields={
                "model": honoured(
                    "resolved against the live catalogue; a substitute is named in `x-q2api-upstream-model`"
                ),
                "messages": honoured(),
                "max_tokens": emulated(
                    "Amazon Q has no output limit: the reply is cut locally (`stop_reason: max_tokens`)"
                ),
                "stream": honoured(),
                "system": honoured(
                    "sent as the conversation's first, stable context turn (Amazon Q has no system field)"
                ),
                "metadata": honoured(),
                "stop_sequences": emulated("matched on the streamed text (`stop_reason: stop_sequence`)"),
                "thinking": honoured(),
                "tools": honoured(),
                "tool_choice": honoured(),
                "output_config": honoured(),
                "cache_control": emulated(
                    "marks the last block of the last message, as Anthropic's automatic caching does"
                ),
                "context_management": emulated("the gateway applies the edits itself (below)"),
                "compaction": emulated(
                    "the gateway asks the model for a summary of the conversation and answers with that `compaction` "
                    "block alone (`stop_reason: compaction`)"
                ),
                "temperature": ignored("Amazon Q has no sampling controls; the model's defaults apply"),
                "top_p": ignored("Amazon Q has no sampling controls; the model's defaults apply"),
                "top_k": ignored("Amazon Q has no sampling controls; the model's defaults apply"),
                "speed": ignored("Amazon Q has one speed: the reply is the same, only not faster"),
                "service_tier": ignored("Amazon Q has no service tiers; each account's own limits apply"),
                "inference_geo": ignored("the region is the account's (`AMAZONQ_REGION`), not the request's"),
                "diagnostics": ignored("asks Anthropic's cache for why it missed; nothing about the reply changes"),
                "user_profile_id": ignored(
                    "Anthropic's attribution of the request to a profile; q2api's keys attribute it"
                ),
                "workspace_id": ignored("Anthropic's workspaces; q2api's client keys take their place"),
                "billing_policy": ignored(
                    "who Anthropic bills; the gateway's accounts pay, and its usage ledger counts"
                ),
                "fallback_credit_token": ignored(
                    "a credit for a retry after an Anthropic refusal; nothing to redeem here"
                ),
                "fallbacks": ignored(
                    "models to retry on after a refusal: q2api serves the one model `model` resolves to, and a refusal "
                    "is answered as one"
                ),
                "betas": ignored(
                    "the SDK sends them as the `anthropic-beta` header, which is accepted and never forwarded: each "
                    "feature is served by the field that asks for it"
                ),
                "container": refused(
                    "code execution containers (and the skills they load) exist only at Anthropic: leave `container` "
                    "out and run code in your client"
                ),
                "mcp_servers": _NO_MCP,
                "thread": refused("q2api keeps no server-side threads: send the whole conversation in `messages`"),
            },
        ),
        Shape(
            "MetadataParam",
            "`metadata`",
            fields={"user_id": honoured("Claude Code's session keeps its conversation (and account) across turns")},
        ),
        Shape(
            "OutputConfigParam",
            "`output_config`",
            fields={
                "effort": honoured("native effort for a model that reasons natively; else a thinking budget"),
                "format": emulated(
                    "the schema is given to the model and the reply checked against it: one repair turn, then a 422 "
                    "(`messages.parse()` gets the parsed object)"
                ),
                "task_budget": ignored(
                    "advisory: the model is shown no countdown; `max_tokens` still bounds each reply"
                ),
            },
        ),
        Shape(
            "JSONOutputFormatParam",
            "`output_config.format`",
            fields={"schema": SCHEMA_CHECKED},
        ),
        Shape("CacheControlEphemeralParam", "`cache_control`", fields={"ttl": _CACHE_TTL}),
        # -- thinking
        Shape(
            "ThinkingConfigEnabledParam",
            "`thinking` `enabled`",
            fields={
                "budget_tokens": honoured("natively, or as the thinking hint's length"),
                "display": honoured("passed to a model that reasons natively and takes it; tag-form thinking is shown"),
                "block_binding": ignored(
                    "how Anthropic binds signed thinking to a prefix; Amazon Q checks its own signatures"
                ),
            },
        ),
        Shape(
            "ThinkingConfigAdaptiveParam",
            "`thinking` `adaptive`",
            fields={
                "display": honoured("passed to a model that reasons natively and takes it; tag-form thinking is shown"),
                "block_binding": ignored(
                    "how Anthropic binds signed thinking to a prefix; Amazon Q checks its own signatures"
                ),
            },
        ),
        Shape("ThinkingConfigDisabledParam", "`thinking` `disabled`", rule=honoured()),
        Shape(
            "ThinkingConfigBetweenToolsParam",
            "`thinking` `between_tools`",
            rule=emulated(
                "a model that reasons natively gets its own interleaved or adaptive thinking; another the thinking hint"
            ),
        ),
        # -- messages
        Shape("UserMessageParam", "`messages[]` `user`", fields={"role": honoured(), "content": honoured()}),
        Shape(
            "AssistantMessageParam",
            "`messages[]` `assistant`",
            fields={"role": honoured(), "content": honoured("a final assistant message is continued (prefill)")},
        ),
        Shape(
            "SystemMessageParam",
            "`messages[]` `system`",
            fields={
                "role": honoured("labelled context inside the user turn where it stands"),
                "content": honoured("text blocks only"),
                "clear_at": emulated("`next_user_message`: left out once a later user message follows"),
                "output_config": honoured(),
            },
        ),
        Shape(
            "SystemMessageOutputConfigParam",
            "a system message's `output_config`",
            fields={
                "effort": emulated(
                    "the effort of the reply that follows, when the message stands after the last assistant message"
                )
            },
        ),
        # -- content blocks
        Shape(
            "TextBlockParam",
            "a `text` block (also `system[]`)",
            fields={"text": honoured(), "cache_control": _CACHE, "citations": _OLD_CITATIONS},
        ),
        Shape(
            "ImageBlockParam",
            "an `image` block",
            fields={
                "source": honoured("base64 images; URL and file sources are refused (the gateway fetches nothing)"),
                "cache_control": _CACHE,
                "transformations": ignored(
                    "an image Amazon Q cannot take is refused with a 400 naming it, never scaled unseen"
                ),
            },
        ),
        Shape(
            "Base64ImageSourceParam",
            "an image's `base64` source",
            fields={"data": honoured(), "media_type": honoured()},
        ),
        Shape(
            "URLImageSourceParam",
            "an image's `url` source",
            rule=refused("the gateway fetches nothing: send the image as base64"),
        ),
        Shape(
            "FileImageSourceParam",
            "an image's `file` source",
            rule=refused("the Files API is not served: send the image as base64"),
        ),
        Shape(
            "DocumentBlockParam",
            "a `document` block",
            aliases=("RequestDocumentBlockParam",),
            fields={
                "source": honoured("PDF text is extracted by the gateway; URL and file sources are refused"),
                "title": honoured(),
                "context": honoured(),
                "cache_control": _CACHE,
                "citations": _NO_CITATIONS,
            },
        ),
        Shape(
            "Base64PDFSourceParam",
            "a document's `base64` source",
            fields={"data": emulated("the PDF's text, extracted by the gateway"), "media_type": honoured()},
        ),
        Shape(
            "PlainTextSourceParam", "a document's `text` source", fields={"data": honoured(), "media_type": honoured()}
        ),
        Shape("ContentBlockSourceParam", "a document's `content` source", fields={"content": honoured()}),
        Shape(
            "URLPDFSourceParam",
            "a document's `url` source",
            rule=refused("the gateway fetches nothing: send the document as base64 or text"),
        ),
        Shape(
            "FileDocumentSourceParam",
            "a document's `file` source",
            rule=refused("the Files API is not served: send the document as base64 or text"),
        ),
        Shape(
            "SearchResultBlockParam",
            "a `search_result` block",
            fields={
                "source": honoured(),
                "title": honoured(),
                "content": honoured("as text"),
                "cache_control": _CACHE,
                "citations": _NO_CITATIONS,
            },
        ),
        Shape(
            "ToolUseBlockParam",
            "a `tool_use` block",
            fields={
                "id": honoured(),
                "name": honoured(),
                "input": honoured(),
                "cache_control": _CACHE,
                "caller": ignored("who made the call: every call in the history is the model's own to Amazon Q"),
                "toolset_name": ignored("the toolset of an MCP tool; the tool's name is what the model called"),
            },
        ),
        Shape(
            "ToolResultBlockParam",
            "a `tool_result` block",
            fields={
                "tool_use_id": honoured(),
                "content": honoured(),
                "is_error": honoured(),
                "cache_control": _CACHE,
                "toolset_name": ignored("the toolset of an MCP tool; the result answers its call by id"),
            },
        ),
        Shape(
            "ToolReferenceBlockParam",
            "a `tool_reference` block",
            fields={"tool_name": honoured("as text naming the tool"), "cache_control": _CACHE},
        ),
        Shape(
            "ThinkingBlockParam",
            "a `thinking` block",
            fields={
                "thinking": honoured(),
                "signature": honoured("an upstream signature sends the thinking back natively"),
            },
        ),
        Shape(
            "RedactedThinkingBlockParam",
            "a `redacted_thinking` block",
            fields={"data": honoured("back to a model that reasons natively; else left out and reported")},
        ),
        Shape(
            "ServerToolUseBlockParam",
            "a `server_tool_use` block",
            fields={
                "id": honoured(),
                "name": emulated("a web search the client was shown travels as text; others are left out and reported"),
                "input": honoured(),
                "cache_control": _CACHE,
                "caller": _CALLERS,
            },
        ),
        Shape(
            "WebSearchToolResultBlockParam",
            "a `web_search_tool_result` block",
            fields={
                "tool_use_id": honoured(),
                "content": emulated("the results travel as text"),
                "cache_control": _CACHE,
                "caller": _CALLERS,
            },
        ),
        Shape(
            "WebSearchResultBlockParam",
            "a web search result",
            fields={
                "url": honoured(),
                "title": honoured(),
                "page_age": honoured(),
                "encrypted_content": ignored("Anthropic's encrypted page text; the title and URL travel"),
            },
        ),
        Shape("WebSearchToolRequestErrorObjectParam", "a web search error", fields={"error_code": honoured()}),
        Shape("WebFetchToolResultBlockParam", "a `web_fetch_tool_result` block", rule=_SERVER_ARTEFACT),
        Shape("CodeExecutionToolResultBlockParam", "a `code_execution_tool_result` block", rule=_SERVER_ARTEFACT),
        Shape(
            "BashCodeExecutionToolResultBlockParam", "a `bash_code_execution_tool_result` block", rule=_SERVER_ARTEFACT
        ),
        Shape(
            "TextEditorCodeExecutionToolResultBlockParam",
            "a `text_editor_code_execution_tool_result` block",
            rule=_SERVER_ARTEFACT,
        ),
        Shape("ToolSearchToolResultBlockParam", "a `tool_search_tool_result` block", rule=_SERVER_ARTEFACT),
        Shape(
            "FallbackBlockParam",
            "a `fallback` block",
            rule=ignored("a record that Anthropic switched models; it holds nothing for the model"),
        ),
        Shape(
            "ContainerUploadBlockParam",
            "a `container_upload` block",
            rule=refused(
                "there is no code execution container to upload to: send the file's content as a document or text"
            ),
        ),
        Shape(
            "CompactionBlockParam",
            "a `compaction` block",
            fields={
                "content": emulated("the conversation starts again from this summary: what came before it is left out"),
                "cache_control": _CACHE,
                "encrypted_content": ignored(
                    "Anthropic's opaque compaction data; q2api's blocks carry their summary in `content`"
                ),
                "signature": ignored("sent back unchanged by clients; the summary is read as it is"),
                "tool_changes": ignored("q2api's compaction blocks carry none; the request's `tools` stand"),
            },
        ),
        Shape("MCPToolUseBlockParam", "an `mcp_tool_use` block", rule=_NO_MCP),
        Shape("RequestMCPToolResultBlockParam", "an `mcp_tool_result` block", rule=_NO_MCP),
        Shape("MCPToolListingBlockParam", "an `mcp_tool_listing` block", rule=_NO_MCP),
        Shape("AdvisorToolResultBlockParam", "an `advisor_tool_result` block", rule=_NO_ADVISOR),
        Shape("BrowserStateBlockParam", "a `browser_state` block", rule=_NO_COMPUTER),
        Shape("RequestToolAdditionBlockParam", "a `tool_addition` block", rule=_NO_TOOL_CHANGES),
        Shape("RequestToolRemovalBlockParam", "a `tool_removal` block", rule=_NO_TOOL_CHANGES),
        # -- tools
        Shape(
            "ToolParam",
            "`tools[]` (a client tool)",
            fields={
                "type": honoured("`custom`, or left out"),
                "name": honoured("renamed for Amazon Q where needed (64 characters, its alphabet), and back"),
                "input_schema": honoured("cleaned of nulls, with an object root"),
                "description": honoured(
                    "a description over Amazon Q's limit is cut, its whole text kept in the context"
                ),
                "cache_control": _CACHE,
                "strict": _STRICT,
                "input_examples": _EXAMPLES,
                "defer_loading": _DEFER,
                "eager_input_streaming": ignored("tool input streams as it comes either way"),
                "allowed_callers": _CALLERS,
            },
        ),
        Shape(
            "InputSchemaTyped",
            "a tool's `input_schema`",
            fields={"type": honoured(), "properties": honoured(), "required": honoured()},
        ),
        Shape(
            "ToolBash20250124Param",
            "`tools[]` `bash_20250124`",
            aliases=("ToolBash20241022Param",),
            fields=_anthropic_tool(_TOOL_SCHEMA),
        ),
        Shape(
            "ToolTextEditor20250728Param",
            "`tools[]` `text_editor_*`",
            aliases=("ToolTextEditor20250429Param", "ToolTextEditor20250124Param", "ToolTextEditor20241022Param"),
            fields={
                **_anthropic_tool(_TOOL_SCHEMA),
                "max_characters": ignored("how much of a file the client's viewer returns: the client's own setting"),
            },
        ),
        Shape("MemoryTool20250818Param", "`tools[]` `memory_20250818`", fields=_anthropic_tool(_TOOL_SCHEMA)),
        Shape(
            "WebSearchTool20250305Param",
            "`tools[]` `web_search_*`",
            aliases=("WebSearchTool20260209Param", "WebSearchTool20260318Param"),
            fields=_WEB_SEARCH_FIELDS,
        ),
        Shape(
            "ToolSearchToolRegex20251119Param",
            "`tools[]` `tool_search_tool_*`",
            aliases=("ToolSearchToolBm25_20251119Param",),
            rule=ignored(
                "every tool is offered to the model up front, deferred or not: there is nothing to search for"
            ),
        ),
        Shape(
            "CodeExecutionTool20250825Param",
            "`tools[]` `code_execution_*`",
            aliases=(
                "CodeExecutionTool20250522Param",
                "CodeExecutionTool20260120Param",
                "CodeExecutionTool20260521Param",
            ),
            rule=_NO_CODE_EXECUTION,
        ),
        Shape(
            "WebFetchTool20250910Param",
            "`tools[]` `web_fetch_*`",
            aliases=("WebFetchTool20260209Param", "WebFetchTool20260309Param", "WebFetchTool20260318Param"),
            rule=_NO_WEB_FETCH,
        ),
        Shape(
            "ToolComputerUse20251124Param",
            "`tools[]` `computer_*`",
            aliases=("ToolComputerUse20250124Param", "ToolComputerUse20241022Param", "ComputerToolset20260801Param"),
            rule=_NO_COMPUTER,
        ),
        Shape("BrowserToolset20260801Param", "`tools[]` `browser_*`", rule=_NO_COMPUTER),
        Shape("MCPToolsetParam", "`tools[]` `mcp_toolset`", rule=_NO_MCP),
        Shape("AdvisorTool20260301Param", "`tools[]` `advisor_*`", rule=_NO_ADVISOR),
        Shape(
            "UserLocationParam",
            "a web search's `user_location`",
            fields={name: honoured() for name in ("city", "region", "country", "timezone")},
        ),
        # -- tool choice
        Shape(
            "ToolChoiceAutoParam",
            "`tool_choice` `auto`",
            fields={
                "disable_parallel_tool_use": emulated(
                    "asked of the model in the current message (Amazon Q cannot enforce it)"
                )
            },
        ),
        Shape(
            "ToolChoiceAnyParam",
            "`tool_choice` `any`",
            fields={
                "disable_parallel_tool_use": emulated(
                    "asked of the model in the current message (Amazon Q cannot enforce it)"
                )
            },
        ),
        Shape(
            "ToolChoiceToolParam",
            "`tool_choice` `tool`",
            fields={
                "name": emulated(
                    "the model is told to call this tool in the current message (Amazon Q cannot force a tool)"
                ),
                "disable_parallel_tool_use": emulated(
                    "asked of the model in the current message (Amazon Q cannot enforce it)"
                ),
            },
        ),
        Shape("ToolChoiceNoneParam", "`tool_choice` `none`", rule=honoured("no tool is offered")),
        # -- context management
        Shape(
            "ContextManagementConfigParam",
            "`context_management`",
            fields={
                "edits": emulated(
                    "applied by the gateway in order, before conversion; reported in `context_management.applied_edits`"
                )
            },
        ),
        Shape(
            "ClearToolUses20250919EditParam",
            "`context_management.edits[]` `clear_tool_uses_20250919`",
            fields={
                "trigger": emulated(
                    "input tokens (estimated) or tool uses past which it clears; 100,000 input tokens by default"
                ),
                "keep": emulated("the most recent tool uses kept; 3 by default"),
                "clear_at_least": emulated("clears nothing unless at least this many input tokens go"),
                "exclude_tools": emulated("uses of these tools are never cleared"),
                "clear_tool_inputs": emulated("also clear the inputs of the cleared uses (all, or of the tools named)"),
            },
        ),
        Shape(
            "ClearThinking20251015EditParam",
            "`context_management.edits[]` `clear_thinking_20251015`",
            fields={
                "keep": emulated(
                    "the thinking of this many most recent assistant turns is kept; 1 by default, or `all`"
                )
            },
        ),
        Shape(
            "Compact20260112EditParam",
            "`context_management.edits[]` `compact_20260112`",
            fields={
                "trigger": emulated(
                    "input tokens (estimated) past which the conversation is summarised; 150,000 by default, at least 50,000"
                ),
                "instructions": emulated("replace the gateway's summarising prompt"),
                "pause_after_compaction": emulated(
                    "answer with the `compaction` block alone (`stop_reason: compaction`)"
                ),
            },
        ),
        Shape(
            "InputTokensTriggerParam",
            "an `input_tokens` trigger",
            aliases=("InputTokensClearAtLeastParam",),
            fields={"value": emulated("counted with the gateway's token estimate")},
        ),
        Shape(
            "ToolUsesTriggerParam",
            "a `tool_uses` trigger",
            aliases=("ToolUsesKeepParam",),
            fields={"value": emulated("counted over the conversation's tool uses")},
        ),
        Shape(
            "ThinkingTurnsParam",
            "a `thinking_turns` keep",
            fields={"value": emulated("assistant turns with thinking, newest first")},
        ),
        Shape("AllThinkingTurnsParam", "an `all` keep", rule=emulated("no thinking is cleared")),
        Shape(
            "CompactionConfigParam",
            "`compaction`",
            fields={"instructions": emulated("replace the gateway's summarising prompt (blank is none)")},
        ),
    ],
)
