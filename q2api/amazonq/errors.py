"""Amazon-Q-side failures: the exception classes and how an error reply is classified.

    UpstreamError                      no reply could be obtained from Amazon Q
    ├── UpstreamHTTPError              (status, code, message, reason, request_id, retry_after, body); `.kind`
    │   └── RefusedForSize             (size, host): a size-shaped 400, read as a context overflow
    ├── UpstreamTimeout                (phase: TimeoutPhase, seconds)
    ├── UpstreamUnavailable            refused, reset, DNS, TLS, or broken mid-reply
    │   └── HostUnreachable            no connection could be opened to the host (refused, DNS, TLS)
    ├── RefreshRejected                (account_label, detail): the account needs a new login
    │   └── NoAccountConfigured
    ├── ModelNotServed                 (model): no account's catalogue has the model
    ├── RequestTooLarge                (size, limit): the encoded request is over the upstream's limit
    │   └── RequestKnownTooLarge       (size, limit, host): the host refused one as large before; not sent
    ├── AccountsBusy                   (retry_after): every eligible account has its cap of requests in flight
    └── RefreshUnavailable             the token service could not be reached; tokens are kept

Frame-level faults of the event stream have their own tree (`q2api.amazonq.eventstream.errors`).

Pure: nothing here does I/O. The upstream client raises these classes; the
app maps them to Anthropic errors (``q2api.translation.error_mapping``); the account pool
reads :class:`FailureKind` to decide on cool-downs.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import orjson

BEARER_INVALID_TEXT = "bearer token included in the request is invalid"
# Texts, reasons and codes Amazon Q uses for its failures (docs/protocol.md#errors).
_CONTEXT_OVERFLOW_MARKERS = ("CONTENT_LENGTH_EXCEEDS_THRESHOLD", "Input is too long")
_MONTHLY_MARKERS = ("MONTHLY_REQUEST_COUNT", "reached for this month")
_QUOTA_MARKERS = (
    "DAILY_REQUEST_COUNT",
    "OVERAGE_REQUEST_LIMIT_EXCEEDED",
    "CONVERSATION_LIMIT_EXCEEDED",
    "ServiceQuotaExceededException",
)
_OVERLOAD_MARKERS = (
    "INSUFFICIENT_MODEL_CAPACITY",
    "MODEL_TEMPORARILY_UNAVAILABLE",
    "unexpectedly high load",
    "ServiceUnavailableException",
)
_SUSPENDED_MARKER = "TEMPORARILY_SUSPENDED"
_MAX_MESSAGE_CHARS = 2000
_MAX_BODY_KEPT = 64 * 1024


class UpstreamError(Exception):
    """Base class of every failure to obtain a reply from Amazon Q."""


class UpstreamHTTPError(UpstreamError):
    """Amazon Q answered with a non-200 status (after any retries)."""

    def __init__(
        self,
        status: int,
        code: str | None,
        message: str,
        reason: str | None = None,
        request_id: str | None = None,
        retry_after: int | None = None,
        body: bytes = b"",
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.reason = reason
        self.request_id = request_id
        self.retry_after = retry_after
        self.body = body  # the answer's body as it came (its first _MAX_BODY_KEPT bytes): for captures
        super().__init__(f"Amazon Q HTTP {status} {code or ''}: {message}".replace("  ", " "))

    @property
    def kind(self) -> FailureKind:
        return classify_failure(self.status, self.code, self.message, self.reason)

    @property
    def suspended(self) -> bool:
        """Amazon Q suspended the account: it must stop serving until an operator acts."""
        return is_suspension(self.reason, self.message)

    def __repr__(self) -> str:
        return (
            f"UpstreamHTTPError(status={self.status}, code={self.code!r}, reason={self.reason!r}, "
            f"message={self.message!r}, request_id={self.request_id!r})"
        )


SIGNATURE_INVALID_REASON = "THINKING_SIGNATURE_INVALID"


def is_signature_refusal(error: UpstreamHTTPError) -> bool:
    """Amazon Q refused a thinking signature of the history (docs/protocol.md#native-thinking: HTTP 400, reason
    THINKING_SIGNATURE_INVALID; peers match the reason anywhere in the body)."""
    return error.status == 400 and (
        error.reason == SIGNATURE_INVALID_REASON or SIGNATURE_INVALID_REASON in (error.message or "")
    )


class RefusedForSize(UpstreamHTTPError):
    """Amazon Q refused the request with a size-shaped 400 (q2api.amazonq.body_sizes.is_size_refusal): the
    client hears a prompt too long naming the size, so Claude Code compacts, whatever text the host used."""

    def __init__(self, refusal: UpstreamHTTPError, size: int, host: str) -> None:
        super().__init__(
            refusal.status,
            refusal.code,
            refusal.message,
            refusal.reason,
            refusal.request_id,
            refusal.retry_after,
            refusal.body,
        )
        self.size = size
        self.host = host

    @property
    def kind(self) -> FailureKind:
        return FailureKind.CONTEXT_OVERFLOW

    @property
    def size_detail(self) -> str:
        """Without parentheses: the OpenAI doors recognise the context-overflow message by its shape."""
        return f"Amazon Q at {self.host} refused the {self.size:,}-byte request as too large"


MODEL_REFUSED_REASON = "INVALID_MODEL_ID"


def is_model_refusal(error: BaseException) -> bool:
    """Amazon Q refused the request's model for this account (HTTP 400, reason INVALID_MODEL_ID;
    docs/protocol.md#errors) — also for a model the account's catalogue lists (9router#2882, #2308)."""
    return (
        isinstance(error, UpstreamHTTPError)
        and error.status == 400
        and (error.reason == MODEL_REFUSED_REASON or MODEL_REFUSED_REASON in error.message)
    )


class TimeoutPhase(enum.StrEnum):
    CONNECT = "connect"  # opening the connection
    FIRST_BYTE = "first_byte"  # waiting for the response headers
    BETWEEN_FRAMES = "between_frames"  # silence between two reads of the body


class UpstreamTimeout(UpstreamError):
    """No connection, no response headers, or no bytes between frames within the configured time."""

    def __init__(self, phase: TimeoutPhase, seconds: float) -> None:
        self.phase = phase
        self.seconds = seconds
        super().__init__(f"Amazon Q did not answer in time ({phase.replace('_', ' ')} timeout, {seconds:g}s)")


class UpstreamUnavailable(UpstreamError):
    """The connection to Amazon Q failed (refused, reset, DNS, TLS), or broke mid-reply."""


class HostUnreachable(UpstreamUnavailable):
    """No connection could be opened to the host (refused, no such name, TLS failed): the host, not the
    request, is at fault, so the account's next host may serve it (docs/protocol.md#hosts)."""


class RefreshRejected(UpstreamError):
    """The token service refused the refresh token: the account needs a new login.

    The message is for the operator; it never contains a token.
    """

    def __init__(self, account_label: str, detail: str) -> None:
        self.account_label = account_label
        self.detail = detail
        super().__init__(
            f"Amazon Q account {account_label!r} can no longer refresh its access token ({detail}). "
            "Sign in again and run `q2api accounts add` with the fresh refresh token "
            "(or update AMAZONQ_REFRESH_TOKEN and restart)."
        )


class NoAccountConfigured(RefreshRejected):
    """The pool is empty: nothing to send the request with."""

    def __init__(self) -> None:
        self.account_label = ""
        self.detail = "no account configured"
        UpstreamError.__init__(
            self,
            "No Amazon Q account is configured: run `q2api accounts import` (the logins Kiro IDE, kiro-cli or "
            "the Amazon Q CLI hold) or `q2api login`, or set AMAZONQ_REFRESH_TOKEN (plus AMAZONQ_CLIENT_ID and "
            "AMAZONQ_CLIENT_SECRET for IdC logins).",
        )


class ModelNotServed(UpstreamError):
    """No account's catalogue has the model (it left the catalogue after the request was resolved)."""

    def __init__(self, model: str) -> None:
        self.model = model
        super().__init__(f"no Amazon Q account may use model {model!r} (it is not in any account's catalogue)")


class RequestTooLarge(UpstreamError):
    """The encoded Amazon Q request is larger than the upstream accepts (docs/protocol.md#limits): it is
    not sent, and the client hears it as a prompt too long (so Claude Code compacts)."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"the Amazon Q request would be {size:,} bytes, over the upstream's limit of {limit:,} bytes")


class RequestKnownTooLarge(RequestTooLarge):
    """The host refused a body at least this large before and never accepted one as large
    (q2api.amazonq.body_sizes): answered by the gateway without a call. The message has no parentheses:
    the OpenAI doors recognise the context-overflow message by its shape."""

    def __init__(self, size: int, host: str, refused_before: int) -> None:
        self.size = size
        self.limit = refused_before
        self.host = host
        UpstreamError.__init__(
            self,
            f"Amazon Q at {host} refused a {refused_before:,}-byte request as too large before, and this one is "
            f"{size:,} bytes, so it was not sent",
        )

    @property
    def size_detail(self) -> str:
        return str(self)


class AccountsBusy(UpstreamError):
    """Every account that could serve the request already has its cap of requests in flight, and none
    freed a slot within the wait: the client should come back in `retry_after` seconds."""

    def __init__(self, cap: int, waited: float, retry_after: int) -> None:
        self.cap = cap
        self.retry_after = retry_after
        super().__init__(
            f"every Amazon Q account already has {cap} requests in flight (waited {waited:g}s for a free slot)"
        )


class RefreshUnavailable(UpstreamError):
    """The token service could not be reached or failed on its side; the tokens are kept, retry later."""


class FailureKind(enum.Enum):
    """What an Amazon Q failure means for retrying, for the account's health and for the client."""

    CONTEXT_OVERFLOW = "context_overflow"
    MONTHLY_QUOTA = "monthly_quota"
    OTHER_QUOTA = "other_quota"  # daily, overage or per-conversation limits
    THROTTLED = "throttled"
    OVERLOADED = "overloaded"
    BEARER_INVALID = "bearer_invalid"
    ACCESS_DENIED = "access_denied"
    BAD_REQUEST = "bad_request"
    SERVER_ERROR = "server_error"

    @property
    def retryable(self) -> bool:
        """Worth another attempt (the same request may succeed a moment later)."""
        return self in (FailureKind.THROTTLED, FailureKind.OVERLOADED, FailureKind.SERVER_ERROR)

    @property
    def account_scoped(self) -> bool:
        """The failure belongs to the account, so another account may succeed right away."""
        return self in (
            FailureKind.THROTTLED,
            FailureKind.MONTHLY_QUOTA,
            FailureKind.OTHER_QUOTA,
            FailureKind.ACCESS_DENIED,
        )


def classify_failure(status: int | None, code: str | None, message: str, reason: str | None) -> FailureKind:
    """The one classifier of Amazon Q failures; order follows the Q CLI's own
    (docs/protocol.md#classifying-a-failure).

    `status` is the HTTP status of an error reply, or None for an exception
    frame inside a 200 event stream.
    """
    haystack = f"{code or ''} {reason or ''} {message}"
    if any(marker in haystack for marker in _CONTEXT_OVERFLOW_MARKERS):
        return FailureKind.CONTEXT_OVERFLOW
    if any(marker in haystack for marker in _MONTHLY_MARKERS):
        return FailureKind.MONTHLY_QUOTA
    if any(marker in haystack for marker in _QUOTA_MARKERS):
        return FailureKind.OTHER_QUOTA
    if any(marker in haystack for marker in _OVERLOAD_MARKERS):
        return FailureKind.OVERLOADED
    if status == 429 or code == "ThrottlingException":
        return FailureKind.THROTTLED
    if status in (401, 403) and BEARER_INVALID_TEXT in message.lower():
        return FailureKind.BEARER_INVALID
    if status == 401:
        return FailureKind.BEARER_INVALID
    if status == 403 or code == "AccessDeniedException":
        return FailureKind.ACCESS_DENIED
    if code == "ValidationException" or (status is not None and status < 500):
        return FailureKind.BAD_REQUEST
    return FailureKind.SERVER_ERROR


def is_suspension(reason: str | None, message: str) -> bool:
    return _SUSPENDED_MARKER in f"{reason or ''} {message}"


def sanitize_error_code(raw: str | None) -> str | None:
    """`com.amazon.aws.codewhisperer#ThrottlingException:http://…` → `ThrottlingException`
    (docs/protocol.md#reading-an-error-reply)."""
    if not raw:
        return None
    code = raw.split(":", 1)[0]
    code = code.rsplit("#", 1)[-1]
    return code.strip() or None


def parse_error_reply(
    status: int, headers: Mapping[str, str], body: bytes, request_id: str | None = None
) -> UpstreamHTTPError:
    """Build the error from a non-200 reply: code, message and reason as
    docs/protocol.md#reading-an-error-reply describes."""
    document: object = None
    try:
        document = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        document = None
    fields = document if isinstance(document, dict) else {}

    raw_code = headers.get("x-amzn-errortype") or _string(fields.get("code")) or _string(fields.get("__type"))
    message = (
        _string(fields.get("message"))
        or _string(fields.get("Message"))
        or _string(fields.get("errorMessage"))
        or _string(fields.get("error_description"))
        or body.decode("utf-8", errors="replace").strip()
        or f"HTTP {status} with an empty body"
    )
    return UpstreamHTTPError(
        status=status,
        code=sanitize_error_code(raw_code),
        message=message[:_MAX_MESSAGE_CHARS],
        reason=_string(fields.get("reason")),
        request_id=request_id,
        retry_after=parse_retry_after(headers.get("retry-after")),
        body=body[:_MAX_BODY_KEPT],
    )


def parse_retry_after(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        seconds = int(float(raw.strip()))
    except ValueError:
        return None  # an HTTP date: rare upstream, and a backoff is a fine substitute
    return max(seconds, 0)


def _string(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
