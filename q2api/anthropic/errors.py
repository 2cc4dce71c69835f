"""The Anthropic error envelope and the exception that carries it.

Every error q2api returns, before or after streaming starts, is built from an
:class:`AnthropicError`, so clients (Claude Code, the official SDKs) classify,
retry or compact exactly as they would against the real API.

    AnthropicError (Exception)         (status, message, error_type, headers) → the envelope
                                       {"type":"error","error":{"type":…,"message":…},"request_id":…}

One class rather than a tree: the SDKs classify by HTTP status (docs/protocol.md#errors-the-sdks-classify), so the
status and `error.type` carried here are the whole classification.
"""

from __future__ import annotations

from typing import Any

# HTTP status -> the `error.type` the real API (and the SDKs) pair with it.
ERROR_TYPE_BY_STATUS: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


class AnthropicError(Exception):
    """An error to be returned to the client in the Anthropic envelope."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        error_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type or ERROR_TYPE_BY_STATUS.get(status, "api_error")
        self.headers = dict(headers or {})

    def envelope(self, request_id: str | None = None) -> dict[str, Any]:
        return error_envelope(self.error_type, self.message, request_id)

    def __repr__(self) -> str:
        return f"AnthropicError({self.status}, {self.error_type!r}, {self.message!r})"


class InvalidRequest(AnthropicError):
    """A 400 about one field of the request; `path` is Anthropic-style (`messages.0.content.1.text`)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(400, f"{path}: {problem}" if path else problem)


def error_envelope(error_type: str, message: str, request_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "error", "error": {"type": error_type, "message": message}}
    if request_id:
        body["request_id"] = request_id
    return body
