"""`POST /v1/responses` (and the WebSocket's `response.create`): every request field of the openai SDK's Responses types.

What the gateway does with each, in the vocabulary of q2api.frontdoors.field_table. Hosted tools
and the items only they make are refused by type (q2api.frontdoors.responses.tools, `request`);
tests/frontdoors/test_field_tables.py holds the table to the installed SDK.
"""

from __future__ import annotations

from q2api.frontdoors.field_table import SCHEMA_CHECKED, FieldTable, Shape, emulated, honoured, ignored, refused

_NO_SAMPLING = ignored("Amazon Q has no sampling controls; the model's defaults apply")
_CACHE_BREAKPOINT = ignored("Amazon Q caches the prompt by its own points; the request is the same without it")
_HOSTED = refused(
    "the Amazon Q backend runs none of OpenAI's hosted tools but web search (`unsupported_tool`): offer a "
    "function or custom tool your client runs"
)
_HOSTED_ITEM = refused("an item of a hosted tool the gateway does not run: leave it out of `input`")
_CALLER = ignored("who made the call: every call reaches Amazon Q as the model's own")
_ASYNC = ignored("the client decides when to run a call; the reply is the same")
_STATUS = ignored("the state of an item OpenAI produced; the gateway reads its content")
_ID = ignored("kept with a stored response; the model needs no ids")
_NAMESPACE = honoured("joined to the name (`namespace__name`), as the tools were offered")
_DEFER = ignored("every tool is offered to the model up front, deferred or not")

RESPONSES_FIELDS = FieldTable(
    "/v1/responses",
    [
        Shape(
            "ResponseCreateParams",
            "the request",
            aliases=("ResponseCreateParamsNonStreaming", "ResponseCreateParamsStreaming"),
            fields={
                "model": honoured(
                    "resolved against the live catalogue; a substitute is named in `x-q2api-upstream-model`"
                ),
                "input": honoured(),
                "instructions": honoured("the system prompt"),
                "previous_response_id": honoured("the stored conversation it continues"),
                "store": honoured("stored for `previous_response_id` and `GET /v1/responses/{id}` unless `false`"),
                "stream": honoured(),
                "tools": honoured(),
                "tool_choice": honoured(),
                "parallel_tool_calls": emulated("`false` is asked of the model (Amazon Q cannot enforce it)"),
                "max_output_tokens": emulated("the reply is cut locally (`incomplete`, `max_output_tokens`)"),
                "reasoning": honoured(),
                "text": honoured(),
                "metadata": honoured("kept with the stored response"),
                "include": honoured("`web_search_call.action.sources`; the rest name outputs the gateway never makes"),
                "truncation": honoured("echoed; the gateway never drops input on its own (`Q2API_TRIM_HISTORY`)"),
                "prompt_cache_key": honoured("names the conversation for session affinity (Codex)"),
                "temperature": _NO_SAMPLING,
                "top_p": _NO_SAMPLING,
                "top_logprobs": ignored("Amazon Q returns no log probabilities"),
                "background": refused(
                    "background responses are not supported: the gateway answers while the client waits"
                ),
                "background_options": refused(
                    "background responses are not supported: the gateway answers while the client waits"
                ),
                "conversation": refused("the Conversations API is not supported; continue with `previous_response_id`"),
                "prompt": refused("stored prompt templates are not supported; send the text as `input`"),
                "context_management": refused(
                    "server-side compaction of a Responses conversation is not supported: leave it out (Codex compacts "
                    "by itself)"
                ),
                "stream_options": ignored("padding against length side channels; the stream is the same without it"),
                "max_tool_calls": ignored(
                    "a limit on hosted-tool calls: the gateway runs at most ten searches a reply"
                ),
                "service_tier": ignored("Amazon Q has no service tiers; each account's own limits apply"),
                "user": ignored(
                    "OpenAI's end-user id for abuse monitoring; the gateway's client keys identify callers"
                ),
                "safety_identifier": ignored(
                    "OpenAI's end-user id for abuse monitoring; the gateway's client keys identify callers"
                ),
                "prompt_cache_retention": ignored("OpenAI's cache lifetime; Amazon Q's is its own"),
                "prompt_cache_options": ignored("OpenAI's cache settings; Amazon Q's are its own"),
                "moderation": ignored("OpenAI's moderation of the conversation; Amazon Q applies its own filter"),
                "image": ignored("settings of image outputs, which the gateway never makes"),
                "access_programs": ignored("OpenAI's programme access flags; nothing to grant here"),
            },
        ),
        Shape("StreamOptions", "`stream_options`", rule=ignored("padding against length side channels")),
        Shape(
            "Reasoning",
            "`reasoning`",
            fields={
                "effort": honoured("thinking with a budget, or the native effort of a model that reasons natively"),
                "summary": honoured("reasoning shown as summaries"),
                "generate_summary": honoured("the older spelling of `summary`"),
                "context": ignored("the reasoning items the client sends back are the ones the model reads"),
                "mode": ignored("Amazon Q has one execution mode; the model reasons as it does"),
            },
        ),
        Shape(
            "ResponseTextConfigParam",
            "`text`",
            fields={
                "format": emulated(
                    "the schema is told to the model and the reply checked: one repair turn, then a failed response"
                ),
                "verbosity": ignored("a GPT model's length dial: the model answers at its own length"),
            },
        ),
        Shape("ResponseFormatText", "`text.format` `text`", rule=honoured()),
        Shape(
            "ResponseFormatJSONObject",
            "`text.format` `json_object`",
            rule=emulated("the reply must be one JSON object"),
        ),
        Shape(
            "ResponseFormatTextJSONSchemaConfigParam",
            "`text.format` `json_schema`",
            fields={
                "name": honoured("told to the model"),
                "description": honoured("told to the model"),
                "schema": SCHEMA_CHECKED,
                "strict": ignored("the reply is checked against the schema either way"),
            },
        ),
        # -- input items
        Shape(
            "EasyInputMessageParam",
            "`input[]` message",
            aliases=("Message", "ResponseOutputMessageParam"),
            fields={
                "role": honoured("system and developer messages as the system prompt or context where they stand"),
                "content": honoured(),
                "phase": honoured("kept when stored (Codex's commentary / final answer)"),
                "id": _ID,
                "status": _STATUS,
            },
        ),
        Shape(
            "ResponseInputTextParam",
            "an `input_text` part",
            aliases=("ResponseInputTextContentParam",),
            fields={"text": honoured(), "prompt_cache_breakpoint": _CACHE_BREAKPOINT},
        ),
        Shape(
            "ResponseInputImageParam",
            "an `input_image` part",
            aliases=("ResponseInputImageContentParam",),
            fields={
                "image_url": honoured("a base64 `data:` URL; http(s) URLs are refused (the gateway fetches nothing)"),
                "file_id": refused("the Files API is not served: send the image as a `data:` URL"),
                "detail": ignored("Amazon Q sees the image as sent"),
                "prompt_cache_breakpoint": _CACHE_BREAKPOINT,
            },
        ),
        Shape(
            "ResponseInputFileParam",
            "an `input_file` part",
            aliases=("ResponseInputFileContentParam",),
            fields={
                "file_data": honoured("base64; a PDF's text is extracted by the gateway"),
                "filename": honoured("the document's title"),
                "file_id": refused("the Files API is not served: send the file inline as `file_data`"),
                "file_url": refused("the gateway fetches nothing: send the file inline as `file_data`"),
                "detail": ignored("Amazon Q reads the file as sent"),
                "prompt_cache_breakpoint": _CACHE_BREAKPOINT,
            },
        ),
        Shape("PromptCacheBreakpoint", "a part's `prompt_cache_breakpoint`", rule=_CACHE_BREAKPOINT),
        Shape(
            "ResponseOutputTextParam",
            "an `output_text` part",
            fields={
                "text": honoured(),
                "annotations": ignored("citations of an earlier reply: its text is kept"),
                "logprobs": ignored("log probabilities of an earlier reply"),
            },
        ),
        Shape("ResponseOutputRefusalParam", "a `refusal` part", fields={"refusal": honoured("as text")}),
        Shape(
            "ResponseFunctionToolCallParam",
            "`input[]` `function_call`",
            fields={
                "call_id": honoured(),
                "name": honoured(),
                "arguments": honoured(),
                "namespace": _NAMESPACE,
                "id": _ID,
                "status": _STATUS,
                "caller": _CALLER,
                "async": _ASYNC,
            },
        ),
        Shape(
            "FunctionCallOutput",
            "`input[]` `function_call_output`",
            fields={
                "call_id": honoured(),
                "output": honoured(),
                "id": _ID,
                "status": _STATUS,
                "caller": _CALLER,
                "name": ignored("the output answers its call by `call_id`"),
                "namespace": ignored("the output answers its call by `call_id`"),
            },
        ),
        Shape(
            "ResponseCustomToolCallParam",
            "`input[]` `custom_tool_call`",
            fields={
                "call_id": honoured(),
                "name": honoured(),
                "input": honoured(),
                "namespace": _NAMESPACE,
                "id": _ID,
                "caller": _CALLER,
                "async": _ASYNC,
            },
        ),
        Shape(
            "ResponseCustomToolCallOutputParam",
            "`input[]` `custom_tool_call_output`",
            fields={"call_id": honoured(), "output": honoured(), "id": _ID, "caller": _CALLER},
        ),
        Shape(
            "ResponseReasoningItemParam",
            "`input[]` `reasoning`",
            fields={
                "summary": honoured("as thinking"),
                "content": honoured("as thinking"),
                "encrypted_content": honoured("as the thinking's signature"),
                "id": _ID,
                "status": _STATUS,
            },
        ),
        Shape("Summary", "a reasoning summary", aliases=("Content",), fields={"text": honoured()}),
        Shape(
            "ResponseFunctionWebSearchParam",
            "`input[]` `web_search_call`",
            fields={
                "action": honoured("the search as the Claude door's search blocks"),
                "id": honoured(),
                "status": _STATUS,
            },
        ),
        Shape(
            "ActionSearch",
            "a web search call's `search` action",
            fields={"query": honoured(), "queries": honoured(), "sources": honoured()},
        ),
        Shape("ActionSearchSource", "a search source", fields={"url": honoured()}),
        Shape("ActionOpenPage", "a web search call's `open_page` action", rule=honoured("as text")),
        Shape("ActionFind", "a web search call's `find_in_page` action", rule=honoured("as text")),
        Shape(
            "ItemReference",
            "`input[]` `item_reference`",
            rule=refused(
                "items are not looked up by id: send the item itself, or continue with `previous_response_id`"
            ),
        ),
        Shape(
            "ResponseCompactionItemParamParam",
            "`input[]` `compaction`",
            rule=refused("OpenAI's encrypted compaction items cannot be read by another model: send the conversation"),
        ),
        Shape(
            "CompactionTrigger",
            "`input[]` `compaction_trigger`",
            rule=refused(
                "server-side compaction of a Responses conversation is not supported (Codex compacts by itself)"
            ),
        ),
        Shape(
            "ResponseConfigurationUpdateItemParamParam",
            "`input[]` `configuration_update`",
            rule=refused("change `reasoning` and `text` on the request instead"),
        ),
        *(
            Shape(name, f"`input[]` `{wire}`", rule=_HOSTED_ITEM)
            for name, wire in (
                ("ResponseFileSearchToolCallParam", "file_search_call"),
                ("ResponseComputerToolCallParam", "computer_call"),
                ("ComputerCallOutput", "computer_call_output"),
                ("ResponseCodeInterpreterToolCallParam", "code_interpreter_call"),
                ("ImageGenerationCall", "image_generation_call"),
                ("LocalShellCall", "local_shell_call"),
                ("LocalShellCallOutput", "local_shell_call_output"),
                ("ShellCall", "shell_call"),
                ("ShellCallOutput", "shell_call_output"),
                ("ApplyPatchCall", "apply_patch_call"),
                ("ApplyPatchCallOutput", "apply_patch_call_output"),
                ("McpListTools", "mcp_list_tools"),
                ("McpApprovalRequest", "mcp_approval_request"),
                ("McpApprovalResponse", "mcp_approval_response"),
                ("McpCall", "mcp_call"),
                ("ToolSearchCall", "tool_search_call"),
                ("ResponseToolSearchOutputItemParamParam", "tool_search_output"),
                ("Program", "program"),
                ("ProgramOutput", "program_output"),
                ("AdditionalTools", "additional_tools"),
            )
        ),
        # -- tools
        Shape(
            "FunctionToolParam",
            "`tools[]` `function`",
            aliases=("ToolFunction",),
            fields={
                "name": honoured(),
                "description": honoured(),
                "parameters": honoured(),
                "strict": emulated(
                    "each call's arguments are checked against `parameters`: one repair turn, then a 422"
                ),
                "defer_loading": _DEFER,
                "allowed_callers": _CALLER,
                "async": _ASYNC,
                "output_schema": ignored("the shape of the client's own result: the model reads the result as it is"),
            },
        ),
        Shape(
            "CustomToolParam",
            "`tools[]` `custom`",
            fields={
                "name": honoured(),
                "description": honoured(),
                "format": emulated("a single-string-input tool; a grammar is told to the model in the description"),
                "defer_loading": _DEFER,
                "allowed_callers": _CALLER,
                "async": _ASYNC,
            },
        ),
        Shape("Text", "a custom tool's `text` format", rule=honoured()),
        Shape(
            "Grammar",
            "a custom tool's `grammar` format",
            fields={"definition": emulated("told to the model"), "syntax": honoured()},
        ),
        Shape(
            "NamespaceToolParam",
            "`tools[]` `namespace`",
            aliases=("ToolSearchOutputNamespaceToolParam",),
            fields={"name": honoured("joined to each tool's name"), "description": honoured(), "tools": honoured()},
        ),
        Shape(
            "WebSearchToolParam",
            "`tools[]` `web_search`",
            fields={
                "filters": honoured(),
                "user_location": honoured("told to the model with the results"),
                "search_context_size": ignored("Kiro's search returns what it returns"),
                "external_web_access": ignored("Kiro's search is live either way"),
            },
        ),
        Shape(
            "WebSearchPreviewToolParam",
            "`tools[]` `web_search_preview`",
            fields={
                "user_location": honoured("told to the model with the results"),
                "search_context_size": ignored("Kiro's search returns what it returns"),
                "search_content_types": ignored("Kiro's search returns text"),
            },
        ),
        Shape(
            "Filters",
            "a web search's `filters`",
            fields={"allowed_domains": honoured("results outside them are dropped")},
        ),
        Shape(
            "UserLocation",
            "a web search's `user_location`",
            fields={name: honoured() for name in ("city", "region", "country", "timezone")},
        ),
        *(
            Shape(name, f"`tools[]` `{wire}`", rule=_HOSTED)
            for name, wire in (
                ("FileSearchToolParam", "file_search"),
                ("ComputerToolParam", "computer"),
                ("ComputerUsePreviewToolParam", "computer_use_preview"),
                ("CodeInterpreter", "code_interpreter"),
                ("ToolCodeInterpreter", "code_interpreter"),
                ("ImageGeneration", "image_generation"),
                ("ToolImageGeneration", "image_generation"),
                ("LocalShell", "local_shell"),
                ("ToolLocalShell", "local_shell"),
                ("FunctionShellToolParam", "shell"),
                ("ApplyPatchToolParam", "apply_patch"),
                ("Mcp", "mcp"),
                ("ToolMcp", "mcp"),
                ("ToolSearchToolParam", "tool_search"),
                ("ProgrammaticToolCalling", "programmatic_tool_calling"),
                ("ToolProgrammaticToolCalling", "programmatic_tool_calling"),
            )
        ),
        # -- tool choice
        Shape(
            "ToolChoiceFunctionParam",
            "`tool_choice` `function`",
            aliases=("ToolChoiceCustomParam",),
            fields={"name": emulated("the model is told to call it (Amazon Q cannot force a tool)")},
        ),
        Shape(
            "ToolChoiceTypesParam",
            "`tool_choice` by hosted type",
            rule=honoured("web search; any other hosted type is refused"),
        ),
        Shape(
            "ToolChoiceAllowedParam",
            "`tool_choice` `allowed_tools`",
            rule=refused("list only the allowed tools in `tools` instead"),
        ),
        *(
            Shape(name, f"`tool_choice` `{wire}`", rule=_HOSTED)
            for name, wire in (
                ("ToolChoiceMcpParam", "mcp"),
                ("ToolChoiceApplyPatchParam", "apply_patch"),
                ("ToolChoiceShellParam", "shell"),
                ("ToolChoiceSpecificProgrammaticToolCallingParam", "programmatic_tool_calling"),
            )
        ),
    ],
)
