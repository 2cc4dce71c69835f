"""Amazon Q failures reach the official SDK as the Anthropic errors clients know how to handle.

The real gateway on loopback, the simulated upstream answering with each failure
Amazon Q is known to send (docs/protocol.md#statuses-seen), and `anthropic.AsyncAnthropic` as the
client. Each case checks what the client acts on: HTTP status, error envelope,
SDK exception class, retry headers; and what the operator reads: one log line
tied to the client's request that names Amazon Q's own request id, and no secret.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Mapping

import anthropic
import httpx2
import pytest

from q2api.testing import scripts
from q2api.testing.scripts import Reply
from q2api.testing.simulated_upstream import SimulatedUpstream
from q2api.translation.error_mapping import DEFAULT_THROTTLE_RETRY_AFTER
from tests.support.gateway_harness import (
    ask,
    assert_error_envelope,
    capture_logs,
    find_secrets,
    gateway,
    sdk,
    with_upstream_request_id,
)

NO_GATEWAY_RETRIES = {"Q2API_MAX_RETRIES": "0"}


@dataclasses.dataclass(frozen=True)
class Case:
    reply: Reply
    status: int
    error_type: str
    exception: type[anthropic.APIStatusError]
    message: str  # a regex the error message must match
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    upstream_answered: bool = True  # False: no reply, hence no upstream request id to log


CASES = {
    "context_overflow": Case(
        scripts.context_overflow(),
        400,
        "invalid_request_error",
        anthropic.BadRequestError,
        # The size-shaped refusal names the size it refused (issue 31 item 4).
        r"^prompt is too long: \d+ tokens > \d+ maximum \(Amazon Q at [^()]+ refused the [\d,]+-byte request as too large\)$",
    ),
    "monthly_quota": Case(
        scripts.monthly_quota(),
        429,
        "rate_limit_error",
        anthropic.RateLimitError,
        r"monthly request limit",
        headers={"x-should-retry": "false"},
    ),
    "throttled_without_hint": Case(
        scripts.throttled(),
        429,
        "rate_limit_error",
        anthropic.RateLimitError,
        r"throttling",
        headers={"retry-after": str(DEFAULT_THROTTLE_RETRY_AFTER)},
        env=NO_GATEWAY_RETRIES,
    ),
    # A hint longer than the gateway's own backoff is passed to the client instead of waited out.
    "throttled_with_long_hint": Case(
        scripts.throttled(retry_after=30),
        429,
        "rate_limit_error",
        anthropic.RateLimitError,
        r"throttling",
        headers={"retry-after": "30"},
    ),
    "suspended": Case(
        scripts.access_denied("TEMPORARILY_SUSPENDED"),
        403,
        "permission_error",
        anthropic.PermissionDeniedError,
        r"suspended",
    ),
    "model_overloaded": Case(
        scripts.model_overloaded(),
        529,
        "overloaded_error",
        anthropic.OverloadedError,
        r"overloaded",
        env=NO_GATEWAY_RETRIES,
    ),
    "service_unavailable": Case(
        scripts.service_unavailable(),
        529,
        "overloaded_error",
        anthropic.OverloadedError,
        r"overloaded",
        env=NO_GATEWAY_RETRIES,
    ),
    "server_error_500": Case(
        scripts.server_error(500),
        500,
        "api_error",
        anthropic.InternalServerError,
        r"Amazon Q failed",
        env=NO_GATEWAY_RETRIES,
    ),
    "improperly_formed": Case(
        scripts.improperly_formed(),
        400,
        "invalid_request_error",
        anthropic.BadRequestError,
        r"Improperly formed request",
    ),
    "first_byte_timeout": Case(
        scripts.slow_headers(1.0),
        504,
        "timeout_error",
        anthropic.GatewayTimeoutError,
        r"did not answer in time",
        env={"Q2API_FIRST_BYTE_TIMEOUT": "0.3"},
        upstream_answered=False,
    ),
    "connection_dropped": Case(
        scripts.hangup(),
        502,
        "api_error",
        anthropic.InternalServerError,
        r"could not be reached",
        env=NO_GATEWAY_RETRIES,
        upstream_answered=False,
    ),
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("name", list(CASES))
async def test_upstream_failure_maps_to_the_anthropic_error(name: str, stream: bool, tmp_path) -> None:
    case = CASES[name]
    upstream_request_id = f"upstream-{uuid.uuid4()}"
    async with SimulatedUpstream() as sim, gateway(sim, tmp_path, **case.env) as url:
        sim.enqueue(with_upstream_request_id(case.reply, upstream_request_id))
        with capture_logs() as logs, pytest.raises(anthropic.APIStatusError) as caught:
            await ask(sdk(url), stream=stream)

        error = caught.value
        assert isinstance(error, case.exception), type(error)
        assert error.status_code == case.status
        message = assert_error_envelope(error.body, case.error_type)
        assert re.search(case.message, message), message
        headers = error.response.headers
        for header, value in case.headers.items():
            assert headers.get(header) == value, (header, dict(headers))
        request_id = headers["request-id"]
        assert error.body["request_id"] == request_id
        assert len(sim.requests) == 1  # max_retries=0 in the SDK; the gateway did not retry either

        if name == "context_overflow":
            tokens, maximum = map(int, re.findall(r"\d+", message)[:2])
            assert tokens > maximum

        # The operator can tie the client's request to Amazon Q's request id.
        ours = logs.for_request(request_id)
        assert any(record.extra.get("status") == case.status for record in ours), logs.text
        if case.upstream_answered:
            assert any(record.extra.get("upstream_request_id") == upstream_request_id for record in ours), logs.text
        assert find_secrets(logs.text) == []
        assert find_secrets(error.response.text) == []


async def test_monthly_quota_is_not_retried_even_by_a_retrying_sdk(tmp_path) -> None:
    # The gateway keeps its default retries too: a quota is not worth repeating at either level.
    async with SimulatedUpstream() as sim, gateway(sim, tmp_path) as url:
        sim.responder = lambda record: scripts.monthly_quota()
        with pytest.raises(anthropic.RateLimitError) as caught:
            await ask(sdk(url, max_retries=2))
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert len(sim.requests) == 1


async def test_throttling_reaches_a_retrying_sdk_as_retryable(tmp_path) -> None:
    # The counterpart of the quota case: a plain throttle has no x-should-retry: false,
    # so the SDK repeats it (and succeeds once the upstream lets it through).
    async with SimulatedUpstream() as sim, gateway(sim, tmp_path, **NO_GATEWAY_RETRIES) as url:
        sim.enqueue(scripts.throttled(retry_after=1), scripts.text_reply("let through"))
        assert await ask(sdk(url, max_retries=1)) == "let through"
    assert len(sim.requests) == 2


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_single_500_is_retried_before_the_first_byte(stream: bool, tmp_path) -> None:
    async with SimulatedUpstream() as sim, gateway(sim, tmp_path, Q2API_MAX_RETRIES="2") as url:
        sim.enqueue(scripts.server_error(500), scripts.text_reply("recovered", chunks=3))
        assert await ask(sdk(url), stream=stream) == "recovered"
    assert len(sim.requests) == 2


@pytest.mark.parametrize(
    "failure",
    ["invalid_grant", "invalid_client", "kiro_rejected"],
)
async def test_a_dead_refresh_token_is_a_401_telling_the_operator_what_to_do(failure: str, tmp_path) -> None:
    async with SimulatedUpstream() as sim:
        auth_method = "social" if failure == "kiro_rejected" else "idc"
        if failure == "invalid_client":
            sim.refresh_failure = "invalid_client"
        else:
            sim.valid_refresh_tokens = set()  # the refresh token the gateway holds is no longer accepted
        async with gateway(sim, tmp_path, auth_method=auth_method) as url:
            with capture_logs() as logs:
                with pytest.raises(anthropic.AuthenticationError) as caught:
                    await ask(sdk(url))
                # A second request is answered from the remembered rejection, without hammering the token service.
                with pytest.raises(anthropic.AuthenticationError):
                    await ask(sdk(url))
            async with httpx2.AsyncClient(base_url=url) as raw:
                health = (await raw.get("/healthz")).json()

    error = caught.value
    assert error.status_code == 401
    message = assert_error_envelope(error.body, "authentication_error")
    assert "q2api accounts add" in message or "AMAZONQ_REFRESH_TOKEN" in message
    assert find_secrets(error.response.text) == []
    assert find_secrets(logs.text) == []
    assert sim.refresh_calls == 1
    assert sim.requests == []  # nothing was sent to Amazon Q without a token
    assert [account["health"] for account in health["accounts"]] == ["needs_login"]


async def test_an_unavailable_token_service_is_a_retryable_5xx(tmp_path) -> None:
    async with SimulatedUpstream() as sim:
        # Down from the start: the start-up catalogue read cannot take a token first.
        sim.refresh_failure = "server_error"
        async with gateway(sim, tmp_path) as url:
            with pytest.raises(anthropic.APIStatusError) as caught:
                await ask(sdk(url))
            assert caught.value.status_code >= 500
            assert caught.value.response.headers.get("x-should-retry") != "false"
            assert_error_envelope(caught.value.body, caught.value.body["error"]["type"])
            # Once the token service is back, the same gateway serves again (no needs-login verdict).
            sim.refresh_failure = None
            sim.enqueue(scripts.text_reply("token service is back"))
            assert await ask(sdk(url)) == "token service is back"
