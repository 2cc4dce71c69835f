"""What the two OpenAI doors (Chat Completions, q2api.frontdoors.chat; Responses,
q2api.frontdoors.responses) share: their error class and envelope mapping, the `response_format`
check, `data:` URL parts, tool-call arguments, and the constants both translate by.

Errors: the pipeline's AnthropicError in, the OpenAI envelope out.

    AnthropicError                       what every stage raises (status, error_type, message, headers)
    └── ChatError                        raised by an OpenAI door; carries the exact OpenAIError to answer with

`openai_error` is the one mapping: statuses the OpenAI SDKs know (Anthropic's 529 overload
becomes 503), `retry-after` / `x-should-retry` kept, and the codes OpenAI clients act on —
`context_length_exceeded` for a prompt over the window (Amazon Q's "Input is too long"),
`insufficient_quota` for an exhausted quota, `rate_limit_exceeded` for throttling.

`response_format` on a backend without a JSON mode: the model is told, then the reply is checked.
Amazon Q has no structured-output switch, so `json_object` and `json_schema` become an
instruction in the system prompt, and the finished reply is checked (parsed, and validated
against the schema with `jsonschema`, within the limits q2api.frontdoors.client_schema sets:
no retrieval, RE2 patterns, a deadline). A reply that fails is reported to the client as an
error, never passed off as valid JSON. A schema that cannot be checked safely is refused
with the request, before any upstream call.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from q2api.anthropic.errors import AnthropicError, InvalidRequest
from q2api.anthropic.json_levels import TOO_DEEP, first_too_deep
from q2api.anthropic.reply_content import ReplyCheck, ReplyContent, Undecided
from q2api.anthropic.types import UNSTATED_MAX_TOKENS
from q2api.frontdoors.claude.output_check import STRICT_TOOL_PROBLEM
from q2api.openai.errors import InvalidChatRequest, OpenAIError
from q2api.openai.types import JsonObjectFormat, JsonSchemaFormat, ResponseFormat

if TYPE_CHECKING:
    from q2api.frontdoors.client_schema import CompiledSchema

# The OpenAI API's default is "as much as the model can write": no local cut unless asked.
DEFAULT_MAX_TOKENS = UNSTATED_MAX_TOKENS
# `reasoning_effort` → the thinking budget Amazon Q's models are told (Claude's minimum is 1024).
THINKING_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 16384, "high": 32768, "xhigh": 65536}
WEB_SEARCH_TOOL_TYPE = "web_search_20250305"
_DATA_URL = re.compile(r"^data:(?P<media_type>[^;,]*)(?P<params>(?:;[^;,]*)*),(?P<data>.*)$", re.DOTALL)
# A reply that failed its check is answered with a status the SDKs never retry, and told so: a
# retry is another whole completion (another credit), and the model was already told the format.
# 422 is final for every client that goes by status (the official SDKs retry 408, 409, 429 and
# 5xx); `x-should-retry: false` is read first by both official SDKs. The `type` stays
# `server_error`: the request was valid, the model's reply was not.
INVALID_RESPONSE_STATUS = 422
NO_RETRY = {"x-should-retry": "false"}

# ------------------------------------------------------------ errors
# The Anthropic API's context-overflow message (translation.error_mapping.prompt_too_long writes it), with
# the gateway's own reason in parentheses when it refused a request over the upstream's size limit.
_PROMPT_TOO_LONG = re.compile(r"^prompt is too long: \d+ tokens > \d+ maximum(?: \([^()]*\))?$")
_OVERLOADED = 529
_CLIENT_STATUS = {_OVERLOADED: 503}
# Claude error types inside a broken stream → the OpenAI `type` of the error chunk.
_STREAM_ERROR_TYPES = {
    "invalid_request_error": "invalid_request_error",
    "authentication_error": "authentication_error",
    "permission_error": "permission_error",
    "rate_limit_error": "rate_limit_error",
}


class ChatError(AnthropicError):
    """An error of an OpenAI door: the pipeline sees an AnthropicError, the client gets `openai`."""

    def __init__(self, openai: OpenAIError, *, error_type: str | None = None) -> None:
        # `error_type` keeps the pipeline's own name for what happened (the log line's `error=`).
        super().__init__(openai.status, openai.message, error_type=error_type, headers=openai.headers)
        self.openai = openai

    @classmethod
    def of(cls, error: AnthropicError) -> ChatError:
        """`error` as the OpenAI client sees it, status included (the log line names that status)."""
        return error if isinstance(error, ChatError) else cls(openai_error(error), error_type=error.error_type)


def openai_error(error: AnthropicError) -> OpenAIError:
    if isinstance(error, ChatError):
        return error.openai
    status = _CLIENT_STATUS.get(error.status, error.status)
    error_type: str | None = None
    param = code = None
    if status == 400 and _PROMPT_TOO_LONG.match(error.message):
        param, code = "messages", "context_length_exceeded"
    elif status == 429 and error.headers.get("x-should-retry") == "false":
        error_type = code = "insufficient_quota"
    elif status == 429:
        code = "rate_limit_exceeded"
    elif status >= 500:
        code = error.error_type  # api_error, overloaded_error, timeout_error: what went wrong behind the gateway
    return OpenAIError(status, error.message, error_type=error_type, param=param, code=code, headers=error.headers)


def client_error_of(error: AnthropicError, param_for: Callable[[str], str | None]) -> AnthropicError:
    """The error in OpenAI terms. A later stage's 400 names a field of the Claude form: the client is
    told its own field instead (`param_for` maps a Claude path to the OpenAI parameter it came from)."""
    if isinstance(error, InvalidRequest):
        param = param_for(error.path)
        if param is not None:
            return ChatError(InvalidChatRequest(param, error.problem), error_type=error.error_type)
    return ChatError.of(error)


def stream_error_body(claude_error: dict[str, Any]) -> dict[str, Any]:
    """The `error` object of a chunk for a Claude stream's `error` event (the SDK raises on it)."""
    claude_type = claude_error.get("type") or "api_error"
    return {
        "message": claude_error.get("message") or "the upstream reply failed",
        "type": _STREAM_ERROR_TYPES.get(claude_type, "server_error"),
        "param": None,
        "code": claude_type,
    }


# ------------------------------------------------------------ request parts


def data_url_parts(url: str, param: str, what: str) -> tuple[str, str]:
    """(media type, base64 data) of a `data:` URL; anything else is refused with a reason."""
    if url[:8].lower().startswith(("http://", "https://")):
        raise InvalidChatRequest(
            param,
            f"{what} URLs are not supported: q2api does not fetch URLs; send the {what} inline as a "
            "base64 data: URL (data:image/png;base64,…)",
        )
    match = _DATA_URL.match(url)
    if match is None:
        raise InvalidChatRequest(param, f"expected a base64 data: URL (data:image/png;base64,…), got {url[:32]!r}")
    if ";base64" not in match["params"].lower() or not match["media_type"]:
        raise InvalidChatRequest(param, "the data: URL must name its media type and be base64-encoded")
    return match["media_type"].lower(), match["data"]


def arguments_object(text: str, param: str) -> dict[str, object]:
    try:
        value = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        raise InvalidChatRequest(param, "the arguments are not valid JSON") from None
    if not isinstance(value, dict):
        raise InvalidChatRequest(param, "the arguments must be a JSON object")
    if first_too_deep([value]) is not None:  # they travel upstream as the tool call's input
        raise InvalidChatRequest(param, TOO_DEEP)
    return value


# ------------------------------------------------------------ response_format
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
