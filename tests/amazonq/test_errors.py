from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.amazonq.errors import (
    FailureKind,
    RefreshRejected,
    TimeoutPhase,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeout,
    classify_failure,
    parse_error_reply,
    sanitize_error_code,
)


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("com.amazon.aws.codewhisperer#ThrottlingException:http://internal.amazon.com/coral/x/", "ThrottlingException"),
        ("ValidationException:http://internal.amazon.com/", "ValidationException"),
        ("com.amazon.aws.codewhisperer#AccessDeniedException", "AccessDeniedException"),
        ("ServiceUnavailableException", "ServiceUnavailableException"),
        ("", None),
        (None, None),
    ],
)
def test_sanitize_error_code(raw, code) -> None:
    assert sanitize_error_code(raw) == code


@given(
    st.text(alphabet=st.characters(blacklist_characters=":#"), min_size=1, max_size=30).map(str.strip).filter(bool),
    st.text(max_size=20),
    st.text(max_size=20),
)
@settings(max_examples=200, deadline=None)
def test_sanitize_strips_any_namespace_and_suffix(name: str, namespace: str, suffix: str) -> None:
    namespace = namespace.replace(":", "")
    assert sanitize_error_code(f"{namespace}#{name}:{suffix}") == name


def test_header_code_wins_over_body() -> None:
    body = orjson.dumps({"__type": "com.x#Other", "message": "m", "reason": "R"})
    error = parse_error_reply(400, {"x-amzn-errortype": "ValidationException:http://x"}, body, "req-1")
    assert (error.code, error.message, error.reason, error.request_id) == ("ValidationException", "m", "R", "req-1")


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ({"code": "ThrottlingException", "Message": "capital"}, "ThrottlingException", "capital"),
        ({"__type": "a.b#InternalServerException", "errorMessage": "em"}, "InternalServerException", "em"),
        (
            {"message": "The bearer token included in the request is invalid.", "reason": None},
            None,
            "The bearer token included in the request is invalid.",
        ),
    ],
)
def test_body_fields(body, code, message) -> None:
    error = parse_error_reply(500, {}, orjson.dumps(body))
    assert (error.code, error.message, error.reason) == (code, message, None)


def test_plain_text_and_empty_bodies() -> None:
    error = parse_error_reply(
        500, {}, b"Encountered unexpectedly high load when processing the request, please try again."
    )
    assert error.message.startswith("Encountered unexpectedly high load")
    assert error.kind is FailureKind.OVERLOADED
    assert parse_error_reply(502, {}, b"").message == "HTTP 502 with an empty body"
    assert parse_error_reply(502, {}, b"[1, 2]").message == "[1, 2]"


def test_retry_after_header() -> None:
    assert parse_error_reply(429, {"retry-after": "7"}, b"{}").retry_after == 7
    assert parse_error_reply(429, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, b"{}").retry_after is None


@pytest.mark.parametrize(
    ("status", "code", "message", "reason", "kind"),
    [
        (400, "ValidationException", "Input is too long.", None, FailureKind.CONTEXT_OVERFLOW),
        (400, "ValidationException", "x", "CONTENT_LENGTH_EXCEEDS_THRESHOLD", FailureKind.CONTEXT_OVERFLOW),
        (400, "ThrottlingException", "Maximum ... reached for this month.", None, FailureKind.MONTHLY_QUOTA),
        (429, "ServiceQuotaExceededException", "m", "MONTHLY_REQUEST_COUNT", FailureKind.MONTHLY_QUOTA),
        (429, "ThrottlingException", "Rate exceeded", None, FailureKind.THROTTLED),
        (429, "ThrottlingException", "busy", "INSUFFICIENT_MODEL_CAPACITY", FailureKind.OVERLOADED),
        (500, "ServiceUnavailableException", "m", None, FailureKind.OVERLOADED),
        (403, None, "The bearer token included in the request is invalid.", None, FailureKind.BEARER_INVALID),
        (401, None, "Unauthorized", None, FailureKind.BEARER_INVALID),
        (403, "AccessDeniedException", "suspended", "TEMPORARILY_SUSPENDED", FailureKind.ACCESS_DENIED),
        (500, "InternalServerException", "boom", None, FailureKind.SERVER_ERROR),
        (400, "ValidationException", "Improperly formed request.", None, FailureKind.BAD_REQUEST),
        (429, "ThrottlingException", "m", "DAILY_REQUEST_COUNT", FailureKind.OTHER_QUOTA),
        (402, "ServiceQuotaExceededException", "over", None, FailureKind.OTHER_QUOTA),
        # An exception frame inside a 200 stream has no status.
        (None, "ThrottlingException", "Rate exceeded", None, FailureKind.THROTTLED),
        (None, "ValidationException", "Improperly formed request.", None, FailureKind.BAD_REQUEST),
        (None, "InternalServerException", "boom", None, FailureKind.SERVER_ERROR),
    ],
)
def test_classification(status, code, message, reason, kind) -> None:
    assert classify_failure(status, code, message, reason) is kind


def test_retryable_and_account_scoped_kinds() -> None:
    assert {kind for kind in FailureKind if kind.retryable} == {
        FailureKind.THROTTLED,
        FailureKind.OVERLOADED,
        FailureKind.SERVER_ERROR,
    }
    assert not FailureKind.MONTHLY_QUOTA.retryable and FailureKind.MONTHLY_QUOTA.account_scoped


def test_every_error_is_an_upstream_error() -> None:
    for error in (
        UpstreamHTTPError(500, None, "m"),
        UpstreamTimeout(TimeoutPhase.FIRST_BYTE, 1),
        RefreshRejected("acc", "d"),
    ):
        assert isinstance(error, UpstreamError)
    assert "q2api accounts add" in str(RefreshRejected("acc", "invalid_grant"))
