"""Errors on the OpenAI door: the pipeline's AnthropicError in, the OpenAI envelope out.

    AnthropicError                       what every stage raises (status, error_type, message, headers)
    └── ChatError                        raised by this door; carries the exact OpenAIError to answer with

`openai_error` is the one mapping: statuses the OpenAI SDKs know (Anthropic's 529 overload
becomes 503), `retry-after` / `x-should-retry` kept, and the codes OpenAI clients act on —
`context_length_exceeded` for a prompt over the window (Amazon Q's "Input is too long"),
`insufficient_quota` for an exhausted quota, `rate_limit_exceeded` for throttling.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from q2api.anthropic.errors import AnthropicError, InvalidRequest
from q2api.openai.errors import InvalidChatRequest, OpenAIError

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
    """An error of the OpenAI door: the pipeline sees an AnthropicError, the client gets `openai`."""

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
