"""`response_format` on a backend without a JSON mode: the model is told, then the reply is checked.

Amazon Q has no structured-output switch, so `json_object` and `json_schema` become an
instruction in the system prompt, and the finished reply is checked (parsed, and validated
against the schema with `jsonschema`, within the limits q2api.frontdoors.client_schema sets:
no retrieval, RE2 patterns, a deadline). A reply that fails is reported to the client as an
error, never passed off as valid JSON. A schema that cannot be checked safely is refused
with the request, before any upstream call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from q2api.anthropic.errors import AnthropicError
from q2api.anthropic.reply_content import ReplyCheck, ReplyContent, Undecided
from q2api.frontdoors.claude.output_check import STRICT_TOOL_PROBLEM
from q2api.openai.errors import InvalidChatRequest
from q2api.openai.types import JsonObjectFormat, JsonSchemaFormat, ResponseFormat

if TYPE_CHECKING:
    from q2api.frontdoors.client_schema import CompiledSchema

_JSON_ONLY = (
    "Answer with one valid JSON document and nothing else: no prose before or after it, no Markdown "
    "code fences. The whole reply must parse as JSON."
)


@dataclass(frozen=True, slots=True)
class ResponseCheck:
    """What the reply must be; `schema` is None for `json_object` (any JSON object)."""

    instruction: str
    schema: CompiledSchema | None = None

    def problem(self, text: str) -> str | None:
        """Why `text` is not what was asked for, or None when it is."""
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            return f"the reply is not valid JSON ({exc})"
        if self.schema is None:
            return None if isinstance(value, dict) else "the reply is JSON but not a JSON object"
        return self.schema.mismatch(value)


# The Claude stop reasons whose reply text the check judges: those OpenAI calls `stop`.
_JUDGED_ENDINGS = ("end_turn", "stop_sequence", "pause_turn")


@dataclass(frozen=True, slots=True)
class HeldResponseCheck:
    """An OpenAI door's checks as the reply is held to them (q2api.translation.held_reply): strict
    tools' calls (the Claude door's check, whose 422 the door renders), then `response_format` —
    one repair turn, then the reply as it is, for the door's own 422 (`invalid_response_format`)."""

    check: ResponseCheck | None
    strict_tools: ReplyCheck | None = None

    def problem(self, content: ReplyContent) -> str | None:
        if self.strict_tools is not None and content.tool_calls:
            problem = self.strict_tools.problem(content)
            if problem is not None:
                return problem
        if self.check is None or content.stop_reason not in _JUDGED_ENDINGS:
            return None
        return self.check.problem(content.text)

    def repair_prompt(self, problem: str) -> str | None:
        if isinstance(problem, Undecided):
            return None
        if self.check is None or (self.strict_tools is not None and problem.startswith(STRICT_TOOL_PROBLEM)):
            assert self.strict_tools is not None
            return self.strict_tools.repair_prompt(problem)
        return f"Your reply was not valid: {problem}. Answer again with the whole reply. {self.check.instruction}"

    def failure(self, problem: str) -> AnthropicError | None:
        if self.strict_tools is not None and problem.startswith(STRICT_TOOL_PROBLEM):
            return self.strict_tools.failure(problem)
        return None


def held_check(check: ResponseCheck | None, strict_tools: ReplyCheck | None) -> HeldResponseCheck | None:
    return HeldResponseCheck(check, strict_tools) if check is not None or strict_tools is not None else None


SCHEMA_PARAM = "response_format.json_schema.schema"


def response_check(response_format: ResponseFormat | None) -> ResponseCheck | None:
    if isinstance(response_format, JsonObjectFormat):
        return ResponseCheck(f"{_JSON_ONLY} It must be a JSON object.")
    if isinstance(response_format, JsonSchemaFormat):
        spec = response_format.json_schema
        schema = spec.schema or {}
        # jsonschema and RE2 are imported by the first request that asks for a schema (idle RSS of every worker).
        from q2api.frontdoors.client_schema import SchemaRefused, compile_client_schema

        try:
            compiled = compile_client_schema(schema)
        except SchemaRefused as exc:
            raise InvalidChatRequest(SCHEMA_PARAM, str(exc)) from None
        about = f" ({spec.description})" if spec.description else ""
        instruction = (
            f"{_JSON_ONLY} It must conform to this JSON schema, named {spec.name!r}{about}:\n"
            f"{orjson.dumps(schema).decode()}"
        )
        return ResponseCheck(instruction, compiled)
    return None
