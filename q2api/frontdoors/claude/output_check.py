"""Structured outputs and strict tools on the Claude door: the schema told, the reply checked.

Anthropic constrains the model's sampling to a schema; Amazon Q cannot, so the gateway emulates
it the way the OpenAI door's `response_format` is (q2api.frontdoors.openai_shared):

* `output_config.format` (`{"type": "json_schema", "schema": …}`, what `messages.parse()` sends):
  the schema goes to the model as an instruction at the end of the system prompt, and a reply
  that ends (`end_turn`, `stop_sequence`) must be one JSON document matching it;
* a tool with `strict: true`: each call of it must have an input matching its `input_schema`
  (the schema is already the model's to read).

The reply is held until it ends and judged (q2api.translation.held_reply): a reply that fails
gets one repair turn, and one that fails again is a 422 (`x-should-retry: false`: a retry is
another whole reply), never passed off as valid. Schemas are compiled within the limits of
q2api.frontdoors.client_schema (no retrieval, RE2 patterns, a deadline); one that cannot be
checked safely is a 400 naming it, before any upstream call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec
import orjson

from q2api.anthropic.errors import AnthropicError, InvalidRequest
from q2api.anthropic.json_levels import TOO_DEEP, first_too_deep
from q2api.anthropic.reply_content import ReplyContent, Undecided
from q2api.anthropic.types import MessagesRequest, TextBlock

if TYPE_CHECKING:
    from q2api.frontdoors.client_schema import CompiledSchema

# A reply still wrong after its repair turn: final for every client that goes by status (the SDKs
# retry 408, 409, 429 and 5xx), and told so (`x-should-retry`, read first by both official SDKs).
INVALID_REPLY_STATUS = 422
NO_RETRY = {"x-should-retry": "false"}
_JUDGED_ENDINGS = ("end_turn", "stop_sequence")
STRICT_TOOL_PROBLEM = "the input of the call"  # how a strict tool's problem starts


def format_instruction(schema: dict[str, Any]) -> str:
    return (
        "Answer with one valid JSON document and nothing else: no prose before or after it, no Markdown code "
        "fences. The whole reply must parse as JSON and conform to this JSON schema:\n"
        f"{orjson.dumps(schema).decode()}"
    )


class ClaudeReplyCheck:
    """What a reply to this request must be (a `ReplyCheck` of q2api.translation.held_reply)."""

    def __init__(self, format_schema: CompiledSchema | None, strict_tools: Mapping[str, CompiledSchema]) -> None:
        self._format = format_schema
        self._strict = strict_tools

    def problem(self, content: ReplyContent) -> str | None:
        for call in content.tool_calls:
            schema = self._strict.get(call.name)
            if schema is None:
                continue
            if call.input is None:
                return f"the input of the call of {call.name!r} is not valid JSON"
            mismatch = schema.mismatch(call.input)
            if mismatch is not None:
                problem = f"the input of the call of {call.name!r} does not match its input_schema: {_input_problem(mismatch)}"
                return Undecided(problem) if isinstance(mismatch, Undecided) else problem
        if self._format is None or content.stop_reason not in _JUDGED_ENDINGS:
            return None
        try:
            value = orjson.loads(content.text)
        except orjson.JSONDecodeError as exc:
            return f"the reply is not valid JSON ({exc})"
        return self._format.mismatch(value)

    def repair_prompt(self, problem: str) -> str | None:
        if isinstance(problem, Undecided):
            return None
        if problem.startswith(STRICT_TOOL_PROBLEM):
            return (
                f"That tool call was not valid: {problem}. Make the call again, with an input that matches the "
                "tool's input_schema exactly."
            )
        return (
            f"Your reply was not valid: {problem}. Answer again with the whole reply: one JSON document that "
            "conforms to the schema, and nothing else."
        )

    def failure(self, problem: str) -> AnthropicError:
        field = "strict tool" if problem.startswith(STRICT_TOOL_PROBLEM) else "output_config.format"
        return AnthropicError(
            INVALID_REPLY_STATUS,
            f"{field} could not be honoured: {problem}. Amazon Q has no structured-output mode; q2api gives the "
            f"model the schema and checks its reply{'' if isinstance(problem, Undecided) else ' (one repair turn was tried)'}",
            error_type="api_error",
            headers=NO_RETRY,
        )


def reply_check(request: MessagesRequest) -> tuple[MessagesRequest, ClaudeReplyCheck | None]:
    """The request with the format's instruction in its system prompt, and the check of its reply
    (None when it asks for neither a format nor a strict tool); InvalidRequest for a schema that
    cannot be checked."""
    output = request.output_config
    strict = [(index, tool) for index, tool in enumerate(request.tools or ()) if tool.strict and tool.input_schema]
    if (output is None or output.format is None) and not strict:
        return request, None
    # jsonschema and RE2 are imported by the first request that asks for a schema (idle RSS of every worker).
    from q2api.frontdoors.client_schema import SchemaRefused, compile_client_schema

    compiled_tools: dict[str, CompiledSchema] = {}
    for index, tool in strict:
        assert tool.input_schema is not None
        try:
            compiled_tools[tool.name] = compile_client_schema(tool.input_schema)
        except SchemaRefused as exc:
            raise InvalidRequest(
                f"tools.{index}.input_schema", f"a strict tool's schema must be checkable: {exc}"
            ) from None
    format_schema = None
    if output is not None and output.format is not None:
        if first_too_deep([output.format.schema]) is not None:  # its instruction is written with orjson
            raise InvalidRequest("output_config.format.schema", TOO_DEEP)
        try:
            format_schema = compile_client_schema(output.format.schema)
        except SchemaRefused as exc:
            raise InvalidRequest("output_config.format.schema", str(exc)) from None
        instruction = TextBlock(text=format_instruction(output.format.schema))
        system = request.system
        blocks = [TextBlock(text=system)] if isinstance(system, str) and system else list(system or ())
        request = msgspec.structs.replace(request, system=[*blocks, instruction])
    return request, ClaudeReplyCheck(format_schema, compiled_tools)


def _input_problem(mismatch: str) -> str:
    return mismatch.replace("the reply does not match the JSON schema", "the input").removeprefix("the reply ")


def strict_tools_check(request: MessagesRequest) -> ClaudeReplyCheck | None:
    """The check of a request's strict tools alone (an OpenAI door's function tools with `strict`)."""
    if not any(tool.strict for tool in request.tools or ()):
        return None
    return reply_check(msgspec.structs.replace(request, output_config=None))[1]
