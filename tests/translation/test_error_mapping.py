"""Amazon Q failures map to the Anthropic errors that make clients do the right thing."""

import re

import pytest

from q2api.translation.error_mapping import map_upstream_error


def mapped(**kwargs):
    kwargs.setdefault("status", 400)
    kwargs.setdefault("code", None)
    kwargs.setdefault("message", "")
    return map_upstream_error(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"code": "ValidationException", "message": "Input is too long."},
        {"code": "ValidationException", "message": "nope", "reason": "CONTENT_LENGTH_EXCEEDS_THRESHOLD"},
        {"status": None, "code": "error", "message": "Input is too long."},
    ],
)
def test_context_overflow_is_the_prompt_too_long_400(kwargs):
    error = mapped(input_tokens=250_000, context_window=200_000, **kwargs)
    assert (error.status, error.error_type) == (400, "invalid_request_error")
    assert error.message == "prompt is too long: 250000 tokens > 200000 maximum"


def test_prompt_too_long_never_contradicts_itself_when_the_estimate_is_low():
    error = mapped(code="ValidationException", message="Input is too long.", input_tokens=1000, context_window=200_000)
    tokens, window = map(int, re.match(r"prompt is too long: (\d+) tokens > (\d+) maximum", error.message).groups())
    assert tokens > window == 200_000


def test_monthly_quota_is_a_429_that_must_not_be_retried():
    error = mapped(
        code="ThrottlingException",
        message="Maximum com.amazon.aws.codewhisperer.streaming.GenerateAssistantResponse reached for this month.",
    )
    assert (error.status, error.error_type) == (429, "rate_limit_error")
    assert error.headers == {"x-should-retry": "false"}


def test_daily_and_overage_quotas_are_429s_that_must_not_be_retried():
    for reason in ("DAILY_REQUEST_COUNT", "OVERAGE_REQUEST_LIMIT_EXCEEDED"):
        error = mapped(status=429, code="ThrottlingException", message="limit", reason=reason)
        assert (error.status, error.error_type) == (429, "rate_limit_error")
        assert error.headers == {"x-should-retry": "false"}


def test_throttling_is_a_429_with_retry_after():
    error = mapped(status=429, code="ThrottlingException", message="Rate exceeded", retry_after=7)
    assert (error.status, error.error_type, error.headers["retry-after"]) == (429, "rate_limit_error", "7")
    assert "retry-after" in mapped(status=429, code="ThrottlingException", message="x").headers


def test_capacity_is_overloaded():
    error = mapped(status=429, code="ThrottlingException", message="x", reason="INSUFFICIENT_MODEL_CAPACITY")
    assert (error.status, error.error_type) == (529, "overloaded_error")
    high_load = mapped(status=500, message="Encountered unexpectedly high load when processing the request")
    assert high_load.status == 529


def test_suspended_account_is_permission_error():
    error = mapped(status=403, code="AccessDeniedException", message="no", reason="TEMPORARILY_SUSPENDED")
    assert (error.status, error.error_type) == (403, "permission_error")
    assert "suspended" in error.message


def test_dead_bearer_token_is_authentication_error():
    error = mapped(status=403, message="The bearer token included in the request is invalid.")
    assert (error.status, error.error_type) == (401, "authentication_error")


def test_improperly_formed_is_a_400_carrying_the_upstream_text():
    error = mapped(code="ValidationException", message="Improperly formed request.")
    assert (error.status, error.error_type) == (400, "invalid_request_error")
    assert "Improperly formed request." in error.message


def test_server_errors():
    assert mapped(status=500, code="InternalServerException", message="boom").status == 500
    assert mapped(status=None, code="InternalServerException", message="boom").status == 529
    assert mapped(status=503, code="ServiceUnavailableException", message="later").error_type == "overloaded_error"


def test_envelope_shape():
    error = mapped(code="ValidationException", message="Improperly formed request.")
    envelope = error.envelope("req_1")
    assert envelope == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": error.message},
        "request_id": "req_1",
    }
