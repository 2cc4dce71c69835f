"""Amazon Q failures → the Anthropic errors clients know how to handle: the one place.

Three ways a failure reaches us, one mapping for all of them: an HTTP error
status while opening the reply (`map_upstream_exception`), an `exception` or
`error` frame inside a 200 event stream (`in_stream_failure`: the exception
name is in `:exception-type` and the JSON payload carries `message`/`reason`;
an `error` frame carries `:error-code`/`:error-message` headers and no
payload, docs/protocol.md#exceptions-in-the-stream, docs/protocol.md#message-types), and a reply that breaks while it is read
(`broken_reply`, `corrupt_stream`, `cut_off`, `bad_payload`).

The mapping decides what Claude Code does next, so each branch is chosen for
the client's reaction (docs/protocol.md#how-clients-react-to-errors):

* context overflow → 400 ``prompt is too long: N tokens > M maximum`` — the one
  shape that makes Claude Code compact instead of retrying the same request;
* monthly / daily quota → 429 with ``x-should-retry: false`` — retrying cannot help;
* throttling → 429 with ``retry-after`` — the SDKs back off and retry;
* capacity / overload → 529 — retried a few times, then reported as overloaded;
* a suspended or unentitled account → 403; a dead bearer token → 401;
* a model no account may use (left the catalogue after the request was resolved) → 404.

This is the only module besides the converter and the translator that knows
both protocols. It is pure: `classify_failure` (q2api.amazonq.errors,
also what the retry and account logic read) decides what a failure is; this
module decides what the client sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from q2api.amazonq import errors as upstream
from q2api.amazonq.errors import FailureKind, classify_failure, is_suspension, sanitize_error_code
from q2api.anthropic.errors import AnthropicError

if TYPE_CHECKING:
    from q2api.amazonq.eventstream import Frame

# Seconds a throttled client should wait when the upstream gave no hint.
DEFAULT_THROTTLE_RETRY_AFTER = 20


def prompt_too_long(input_tokens: int, context_window: int) -> AnthropicError:
    """The exact message Claude Code recognises as a context overflow (it then compacts).

    Amazon Q has already judged the prompt too long, so the reported count is
    at least one past the window even when our local estimate is lower: a
    message claiming "150000 > 200000" would contradict itself.
    """
    tokens = max(input_tokens, context_window + 1)
    return AnthropicError(400, f"prompt is too long: {tokens} tokens > {context_window} maximum")


def map_upstream_error(
    *,
    status: int | None,
    code: str | None,
    message: str,
    reason: str | None = None,
    input_tokens: int = 0,
    context_window: int = 200_000,
    retry_after: int | None = None,
) -> AnthropicError:
    """Map one Amazon Q failure to the error the client must see.

    `status` is the upstream HTTP status, or None for an exception frame inside
    a 200 event stream. `code` is the sanitised exception name
    (`ThrottlingException`, …) or the frame's `:exception-type`.
    """
    detail = message.strip() or code or "no detail given"
    kind = classify_failure(status, code, message, reason)
    if kind is FailureKind.CONTEXT_OVERFLOW:
        return prompt_too_long(input_tokens, context_window)
    if kind is FailureKind.MONTHLY_QUOTA or kind is FailureKind.OTHER_QUOTA:
        what = "monthly request limit reached" if kind is FailureKind.MONTHLY_QUOTA else "quota exhausted"
        return AnthropicError(
            429,
            f"Amazon Q {what} for this account: {detail}",
            error_type="rate_limit_error",
            headers={"x-should-retry": "false"},
        )
    if kind is FailureKind.OVERLOADED:
        return AnthropicError(529, f"Amazon Q is overloaded: {detail}", error_type="overloaded_error")
    if kind is FailureKind.THROTTLED:
        wait = retry_after if retry_after is not None else DEFAULT_THROTTLE_RETRY_AFTER
        return AnthropicError(
            429,
            f"Amazon Q is throttling this account: {detail}",
            error_type="rate_limit_error",
            headers={"retry-after": str(wait)},
        )
    if kind is FailureKind.BEARER_INVALID:
        return AnthropicError(
            401,
            "Amazon Q rejected the account's access token even after a refresh; "
            "check the account's refresh token (`q2api accounts list`).",
            error_type="authentication_error",
        )
    if kind is FailureKind.ACCESS_DENIED:
        if is_suspension(reason, message):
            return AnthropicError(403, f"The Amazon Q account is suspended: {detail}")
        return AnthropicError(403, f"Amazon Q denied access: {detail}")
    if kind is FailureKind.BAD_REQUEST:
        if status == 402:
            return AnthropicError(402, f"Amazon Q requires payment for this account: {detail}")
        return AnthropicError(400, f"Amazon Q rejected the request: {detail}")
    if status is None and code == "InternalServerException":
        # The stream's modelled error: the model failed mid-reply, which the SDKs retry as overload.
        return AnthropicError(529, f"Amazon Q failed mid-reply: {detail}", error_type="overloaded_error")
    return AnthropicError(500, f"Amazon Q failed: {detail}", error_type="api_error")


def map_upstream_exception(
    exc: BaseException, *, input_tokens: int = 0, context_window: int = 200_000
) -> AnthropicError:
    """Map a failure raised while opening or reading an Amazon Q reply (q2api.amazonq.errors).

    Anything that is not an upstream failure is a gateway bug: a plain 500
    whose message does not echo internals.
    """
    if isinstance(exc, (upstream.RefusedForSize, upstream.RequestKnownTooLarge)):
        # A size-shaped refusal (or one known from the host's earlier refusal): the size goes with it.
        too_long = prompt_too_long(input_tokens, context_window)
        return AnthropicError(400, f"{too_long.message} ({exc.size_detail})")
    if isinstance(exc, upstream.UpstreamHTTPError):
        return map_upstream_error(
            status=exc.status,
            code=exc.code,
            message=exc.message,
            reason=exc.reason,
            input_tokens=input_tokens,
            context_window=context_window,
            retry_after=exc.retry_after,
        )
    if isinstance(exc, upstream.RequestTooLarge):
        too_long = prompt_too_long(input_tokens, context_window)
        return AnthropicError(400, f"{too_long.message} ({exc})")
    if isinstance(exc, upstream.AccountsBusy):
        return AnthropicError(
            529, str(exc), error_type="overloaded_error", headers={"retry-after": str(exc.retry_after)}
        )
    if isinstance(exc, upstream.ModelNotServed):
        return AnthropicError(404, str(exc), error_type="not_found_error")
    if isinstance(exc, upstream.UpstreamTimeout):
        return AnthropicError(504, str(exc), error_type="timeout_error")
    if isinstance(exc, upstream.RefreshRejected):  # includes NoAccountConfigured
        return AnthropicError(401, str(exc), error_type="authentication_error")
    if isinstance(exc, upstream.RefreshUnavailable):
        return AnthropicError(
            503, f"The Amazon Q token service is unavailable; try again shortly ({exc})", error_type="api_error"
        )
    if isinstance(exc, upstream.UpstreamUnavailable):
        return AnthropicError(502, f"Amazon Q could not be reached: {exc}", error_type="api_error")
    return AnthropicError(500, "internal gateway error; see the gateway log for details", error_type="api_error")


# ---------------------------------------------------------------------- failures inside a 200 reply

# The one modelled stream error member, `error`, is an InternalServerException (docs/protocol.md#exceptions-in-the-stream).
_MODELLED_ERROR = "InternalServerException"


def in_stream_failure(frame: Frame, *, input_tokens: int, context_window: int) -> AnthropicError:
    """The error for an `exception` or `error` frame."""
    if frame.message_type == "error":
        code = frame.error_code
        message = frame.error_message
        payload: Mapping[str, Any] = {}
        code = code if type(code) is str and code else _MODELLED_ERROR
        message = message if type(message) is str else ""
    else:
        payload = _payload_object(frame.payload)
        exception_type = frame.exception_type
        named = exception_type if type(exception_type) is str and exception_type not in ("", "error") else None
        code = named or _first_str(payload, "__type", "code") or _MODELLED_ERROR
        message = _first_str(payload, "message", "Message", "errorMessage") or ""
    reason = payload.get("reason")
    return map_upstream_error(
        status=None,
        code=sanitize_error_code(code),
        message=message,
        reason=reason if type(reason) is str else None,
        input_tokens=input_tokens,
        context_window=context_window,
    )


def broken_reply(exc: BaseException) -> AnthropicError:
    """The connection dropped while the reply was being read."""
    return AnthropicError(502, f"the connection to Amazon Q broke mid-reply ({type(exc).__name__})")


def corrupt_stream(exc: BaseException) -> AnthropicError:
    return AnthropicError(502, f"Amazon Q sent a corrupt event stream: {exc}")


def cut_off(exc: BaseException) -> AnthropicError:
    return AnthropicError(502, f"Amazon Q's reply was cut off mid-frame: {exc}")


def internal_failure() -> AnthropicError:
    """A fault of our own while decoding or translating (logged with its traceback elsewhere)."""
    return AnthropicError(500, "internal gateway error while relaying Amazon Q's reply; see the gateway log")


def bad_payload(event_type: object, problem: str) -> AnthropicError:
    message = f"Amazon Q sent a {event_type} event whose payload {problem}"
    return AnthropicError(500, message, error_type="api_error")


def _payload_object(raw: bytes) -> Mapping[str, Any]:
    if not raw:
        return {}
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"message": raw.decode("utf-8", "replace")[:500]}
    return payload if type(payload) is dict else {}


def _first_str(payload: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = payload.get(key)
        if type(value) is str and value:
            return value
    return None
