"""The OpenAI error envelope and the exception that carries it.

    OpenAIError (Exception)            (status, message, type, param, code, headers) → the envelope
    └── InvalidChatRequest             a 400 about one request field; `param` names it
                                       {"error":{"message":…,"type":…,"param":…,"code":…}}

The official SDKs classify by HTTP status (400 BadRequestError … 429 RateLimitError,
≥500 InternalServerError) and expose `type`, `param` and `code` from the body; a
stream carries the same object as `data: {"error": {...}}`, which the SDK raises.
"""

from __future__ import annotations

from typing import Any

# HTTP status -> the `type` the real API pairs with it.
ERROR_TYPE_BY_STATUS: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
}
SERVER_ERROR = "server_error"


class OpenAIError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        error_type: str | None = None,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type or ERROR_TYPE_BY_STATUS.get(status, SERVER_ERROR)
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """The inner object: what `error` holds in a response body or a stream chunk."""
        return {"message": self.message, "type": self.error_type, "param": self.param, "code": self.code}

    def envelope(self) -> dict[str, Any]:
        return {"error": self.body()}

    def __repr__(self) -> str:
        return f"OpenAIError({self.status}, {self.error_type!r}, {self.message!r}, param={self.param!r})"


class InvalidChatRequest(OpenAIError):
    """A 400 about one field; `param` is OpenAI-style (`messages[1].content[0].image_url.url`)."""

    def __init__(self, param: str | None, problem: str, *, code: str | None = None) -> None:
        self.problem = problem
        super().__init__(400, f"{param}: {problem}" if param else problem, param=param, code=code)
