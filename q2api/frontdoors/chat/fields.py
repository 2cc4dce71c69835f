"""`POST /v1/chat/completions`: every request field of the openai SDK's chat types, and what the gateway does with it.

The vocabulary is q2api.frontdoors.field_table's; the door's reading enforces the refusals
(q2api.openai.types, q2api.frontdoors.chat.request), and tests/frontdoors/test_field_tables.py
holds the table to the installed SDK.
"""

from __future__ import annotations

import re

from q2api.frontdoors.field_table import SCHEMA_CHECKED, FieldTable, Shape, emulated, honoured, ignored, refused
from q2api.openai.errors import InvalidChatRequest

_NO_SAMPLING = ignored("Amazon Q has no sampling controls; the model's defaults apply")
_NAME = ignored("a participant's name: the model reads the content, which is all the API gives it too")
_CACHE_BREAKPOINT = ignored("Amazon Q caches the prompt by its own points; the request is the same without it")
_NO_AUDIO = refused("Amazon Q takes text and images and answers in text: send a transcript instead")
_NO_CUSTOM = refused(
    "custom (freeform) tools are served by the Responses door (`/v1/responses`); here, use a function tool"
)

CHAT_FIELDS = FieldTable(
    "/v1/chat/completions",
    [
        Shape(
            "CompletionCreateParams",
            "the request",
            aliases=("CompletionCreateParamsNonStreaming", "CompletionCreateParamsStreaming"),
            fields={
                "model": honoured(
                    "resolved against the live catalogue; a substitute is named in `x-q2api-upstream-model`"
                ),
                "messages": honoured(),
                "stream": honoured(),
                "stream_options": honoured(),
                "max_completion_tokens": emulated(
                    "the reply is cut locally (`finish_reason: length`): Amazon Q has no output limit"
                ),
                "max_tokens": emulated("as `max_completion_tokens`, which replaced it"),
                "stop": emulated("matched on the streamed text"),
                "tools": honoured(),
                "tool_choice": honoured(),
                "parallel_tool_calls": emulated("`false` is asked of the model (Amazon Q cannot enforce it)"),
                "functions": honoured("the legacy form: answered with `function_call`"),
                "function_call": honoured("the legacy form of `tool_choice`"),
                "reasoning_effort": honoured(
                    "thinking with a budget, or the native effort of a model that reasons natively"
                ),
                "response_format": emulated(
                    "the schema is told to the model and the reply checked: one repair turn, then a 422"
                ),
                "web_search_options": emulated("Kiro's web search, run by the gateway"),
                "n": refused(
                    "one choice per request: Amazon Q returns one (send n=1 or leave it out, and ask again for more)"
                ),
                "temperature": _NO_SAMPLING,
                "top_p": _NO_SAMPLING,
                "frequency_penalty": _NO_SAMPLING,
                "presence_penalty": _NO_SAMPLING,
                "logit_bias": _NO_SAMPLING,
                "seed": _NO_SAMPLING,
                "logprobs": ignored("Amazon Q returns no log probabilities: `logprobs` stays null, as the SDK allows"),
                "top_logprobs": ignored(
                    "Amazon Q returns no log probabilities: `logprobs` stays null, as the SDK allows"
                ),
                "modalities": refused('the reply is text only: leave `modalities` out or ask for `["text"]`'),
                "audio": _NO_AUDIO,
                "prediction": ignored("predicted output speeds up OpenAI's decoding; the reply is the same without it"),
                "metadata": ignored("kept by OpenAI for its dashboard; the gateway stores no chat completion"),
                "store": ignored("the gateway stores no chat completion (the Responses door stores responses)"),
                "user": ignored(
                    "OpenAI's end-user id for abuse monitoring; the gateway's client keys identify callers"
                ),
                "safety_identifier": ignored(
                    "OpenAI's end-user id for abuse monitoring; the gateway's client keys identify callers"
                ),
                "service_tier": ignored("Amazon Q has no service tiers; each account's own limits apply"),
                "prompt_cache_key": ignored("OpenAI's cache routing; Amazon Q caches by its own points"),
                "prompt_cache_retention": ignored("OpenAI's cache lifetime; Amazon Q's is its own"),
                "prompt_cache_options": ignored("OpenAI's cache settings; Amazon Q's are its own"),
                "verbosity": ignored("a GPT model's length dial: the model answers at its own length"),
                "moderation": ignored("OpenAI's moderation of the conversation; Amazon Q applies its own filter"),
            },
        ),
        Shape(
            "ChatCompletionStreamOptionsParam",
            "`stream_options`",
            fields={
                "include_usage": honoured(),
                "include_obfuscation": ignored(
                    "padding against length side channels; the stream is the same without it"
                ),
            },
        ),
        # -- messages
        Shape(
            "ChatCompletionSystemMessageParam",
            "`messages[]` `system`",
            fields={
                "content": honoured("leading ones the system prompt, later ones context where they stand"),
                "role": honoured(),
                "name": _NAME,
            },
        ),
        Shape(
            "ChatCompletionDeveloperMessageParam",
            "`messages[]` `developer`",
            fields={"content": honoured("as a system message"), "role": honoured(), "name": _NAME},
        ),
        Shape(
            "ChatCompletionUserMessageParam",
            "`messages[]` `user`",
            fields={"content": honoured(), "role": honoured(), "name": _NAME},
        ),
        Shape(
            "ChatCompletionAssistantMessageParam",
            "`messages[]` `assistant`",
            fields={
                "content": honoured(),
                "role": honoured(),
                "tool_calls": honoured(),
                "function_call": honoured("the legacy form"),
                "refusal": honoured("as the turn's text"),
                "name": _NAME,
                "audio": _NO_AUDIO,
            },
        ),
        Shape(
            "ChatCompletionToolMessageParam",
            "`messages[]` `tool`",
            fields={"content": honoured(), "role": honoured(), "tool_call_id": honoured()},
        ),
        Shape(
            "ChatCompletionFunctionMessageParam",
            "`messages[]` `function`",
            fields={
                "content": honoured(),
                "role": honoured(),
                "name": honoured("answers the last unanswered call of that function"),
            },
        ),
        Shape(
            "ChatCompletionContentPartTextParam",
            "a `text` part",
            fields={"text": honoured(), "prompt_cache_breakpoint": _CACHE_BREAKPOINT},
        ),
        Shape(
            "PromptCacheBreakpoint",
            "a part's `prompt_cache_breakpoint`",
            aliases=("FilePromptCacheBreakpoint",),
            rule=_CACHE_BREAKPOINT,
        ),
        Shape(
            "ChatCompletionContentPartImageParam",
            "an `image_url` part",
            fields={
                "image_url": honoured("a base64 `data:` URL; http(s) URLs are refused (the gateway fetches nothing)"),
                "prompt_cache_breakpoint": _CACHE_BREAKPOINT,
            },
        ),
        Shape(
            "ImageURL", "`image_url`", fields={"url": honoured(), "detail": ignored("Amazon Q sees the image as sent")}
        ),
        Shape("ChatCompletionContentPartInputAudioParam", "an `input_audio` part", rule=_NO_AUDIO),
        Shape("File", "a `file` part", fields={"file": honoured(), "prompt_cache_breakpoint": _CACHE_BREAKPOINT}),
        Shape(
            "FileFile",
            "`file`",
            fields={
                "file_data": honoured("a base64 `data:` URL; a PDF's text is extracted by the gateway"),
                "filename": honoured("the document's title"),
                "file_id": refused("the Files API is not served: send the file inline as `file_data`"),
            },
        ),
        Shape("ChatCompletionContentPartRefusalParam", "a `refusal` part", fields={"refusal": honoured("as text")}),
        Shape(
            "ChatCompletionMessageFunctionToolCallParam",
            "`tool_calls[]` `function`",
            fields={"id": honoured(), "function": honoured()},
        ),
        Shape(
            "Function",
            "a tool call's `function`, or a legacy `functions[]` entry (the SDK names both `Function`)",
            aliases=("FunctionCall",),
            fields={"name": honoured(), "arguments": honoured(), "description": honoured(), "parameters": honoured()},
        ),
        Shape("ChatCompletionMessageCustomToolCallParam", "`tool_calls[]` `custom`", rule=_NO_CUSTOM),
        Shape("Audio", "an assistant message's `audio`", rule=_NO_AUDIO),
        Shape("ChatCompletionAudioParam", "`audio`", rule=_NO_AUDIO),
        # -- tools
        Shape("ChatCompletionFunctionToolParam", "`tools[]` `function`", fields={"function": honoured()}),
        Shape(
            "FunctionDefinition",
            "a function tool's `function` (also `functions[]`)",
            fields={
                "name": honoured(),
                "description": honoured(),
                "parameters": honoured(),
                "strict": emulated(
                    "each call's arguments are checked against `parameters`: one repair turn, then a 422"
                ),
            },
        ),
        Shape("ChatCompletionCustomToolParam", "`tools[]` `custom`", rule=_NO_CUSTOM),
        Shape(
            "ChatCompletionNamedToolChoiceParam",
            "`tool_choice` (a function)",
            fields={"function": emulated("the model is told to call it (Amazon Q cannot force a tool)")},
        ),
        Shape(
            "ChatCompletionFunctionCallOptionParam",
            "`function_call` (a function)",
            fields={"name": emulated("the model is told to call it (Amazon Q cannot force a tool)")},
        ),
        Shape("ChatCompletionNamedToolChoiceCustomParam", "`tool_choice` (a custom tool)", rule=_NO_CUSTOM),
        Shape(
            "ChatCompletionAllowedToolChoiceParam",
            "`tool_choice` `allowed_tools`",
            rule=refused("list only the allowed tools in `tools` instead"),
        ),
        # -- response format and search
        Shape("ResponseFormatText", "`response_format` `text`", rule=honoured()),
        Shape(
            "ResponseFormatJSONObject",
            "`response_format` `json_object`",
            rule=emulated("the reply must be one JSON object"),
        ),
        Shape(
            "ResponseFormatJSONSchema",
            "`response_format` `json_schema`",
            fields={"json_schema": emulated("the reply must match `schema`")},
        ),
        Shape(
            "JSONSchema",
            "`response_format.json_schema`",
            fields={
                "name": honoured("told to the model"),
                "description": honoured("told to the model"),
                "schema": SCHEMA_CHECKED,
                "strict": ignored("the reply is checked against the schema either way"),
            },
        ),
        Shape(
            "WebSearchOptions",
            "`web_search_options`",
            fields={
                "user_location": honoured("told to the model with the results"),
                "search_context_size": ignored("Kiro's search returns what it returns"),
            },
        ),
        Shape("WebSearchOptionsUserLocation", "`web_search_options.user_location`", fields={"approximate": honoured()}),
        Shape(
            "WebSearchOptionsUserLocationApproximate",
            "its `approximate`",
            fields={name: honoured() for name in ("city", "region", "country", "timezone")},
        ),
    ],
)

# A tagged `type` the parser does not take, which the table refuses → the shape that says why.
_REFUSED_TAGS = {
    "custom": "ChatCompletionCustomToolParam",
    "allowed_tools": "ChatCompletionAllowedToolChoiceParam",
}
_INVALID_TAG = re.compile(r"^Invalid value '(?P<tag>[^']*)'$")


def refused_tag(error: InvalidChatRequest) -> InvalidChatRequest | None:
    """The parser's "invalid value" of a `type` the table refuses (a custom tool, `allowed_tools`), as that refusal."""
    match = _INVALID_TAG.match(error.problem)
    if match is None or error.param is None or not error.param.endswith("type"):
        return None
    shape = CHAT_FIELDS.shape(_REFUSED_TAGS.get(match["tag"], ""))
    if shape is None or shape.rule is None:
        return None
    return InvalidChatRequest(error.param, f"{match['tag']!r} is not supported: {shape.rule.note}")
