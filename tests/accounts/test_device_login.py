"""Device-code login against the simulated OIDC service: polling, slow_down, expiry, denial."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from q2api.accounts.device_login import (
    BUILDER_ID_START_URL,
    SLOW_DOWN_STEP,
    LoginDenied,
    LoginExpired,
    LoginFailed,
    login_target,
    start_device_login,
    wait_for_approval,
)
from q2api.accounts.refresh import RefreshEndpoints
from q2api.testing.simulated_upstream import SimulatedUpstream


@pytest.fixture
async def sim() -> AsyncIterator[SimulatedUpstream]:
    async with SimulatedUpstream() as upstream:
        upstream.device.interval = 2
        yield upstream


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


class RecordedSleeps:
    """Stands in for asyncio.sleep: records each wait instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


async def test_granted_after_the_pending_polls_at_the_servers_interval(sim, session) -> None:
    login = await start_device_login(session, sim.oidc_url, BUILDER_ID_START_URL)
    [registration_call, start_call] = sim.refresh_requests
    assert registration_call.path == "/client/register"
    assert (
        registration_call.body["clientType"] == "public"
        and "codewhisperer:conversations" in (registration_call.body["scopes"])
    )
    assert start_call.body["startUrl"] == BUILDER_ID_START_URL
    assert login.authorization.user_code.startswith("SIMU-")

    sleeps = RecordedSleeps()
    tokens = await wait_for_approval(session, login, sleep=sleeps)
    assert sleeps.waits == [2, 2, 2]
    assert [answer for _, answer in sim.device.polls] == ["authorization_pending", "authorization_pending", "grant"]
    assert tokens.refresh_token in sim.device.issued_refresh_tokens
    assert tokens.access_token in sim.valid_access_tokens
    for secret in (tokens.access_token, tokens.refresh_token, login.registration.client_secret):
        assert secret not in repr(tokens) + repr(login)


async def test_slow_down_adds_five_seconds_from_then_on(sim, session) -> None:
    sim.device.answers.clear()
    sim.device.answers.extend(["authorization_pending", "slow_down", "authorization_pending"])
    login = await start_device_login(session, sim.oidc_url, BUILDER_ID_START_URL)
    sleeps = RecordedSleeps()
    await wait_for_approval(session, login, sleep=sleeps)
    assert sleeps.waits == [2, 2, 2 + SLOW_DOWN_STEP, 2 + SLOW_DOWN_STEP]


@pytest.mark.parametrize(("answer", "error"), [("access_denied", LoginDenied), ("expired_token", LoginExpired)])
async def test_denial_and_expiry_end_the_login(sim, session, answer: str, error: type[Exception]) -> None:
    sim.device.answers.clear()
    sim.device.answers.extend(["authorization_pending", answer])
    login = await start_device_login(session, sim.oidc_url, BUILDER_ID_START_URL)
    with pytest.raises(error):
        await wait_for_approval(session, login, sleep=RecordedSleeps())
    assert len(sim.device.polls) == 2


async def test_polling_stops_at_the_codes_expiry(sim, session) -> None:
    sim.device.answers.clear()
    sim.device.answers.extend(["authorization_pending"] * 1000)
    sim.device.expires_in = 10
    login = await start_device_login(session, sim.oidc_url, BUILDER_ID_START_URL)
    now = [login.started_at]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(LoginExpired):
        await wait_for_approval(session, login, sleep=sleep, clock=lambda: now[0])
    assert len(sim.device.polls) == 4  # at 2, 4, 6 and 8 s; the wait that reaches 10 s ends it


async def test_an_unreachable_service_fails_the_start(session) -> None:
    with pytest.raises(LoginFailed, match="unreachable"):
        await start_device_login(session, "http://127.0.0.1:9", BUILDER_ID_START_URL)


async def test_the_registered_client_refreshes_the_new_token(sim, session) -> None:
    login = await start_device_login(session, sim.oidc_url, BUILDER_ID_START_URL)
    tokens = await wait_for_approval(session, login, sleep=RecordedSleeps())
    async with session.post(
        f"{sim.oidc_url}/token",
        json={
            "clientId": login.registration.client_id,
            "clientSecret": login.registration.client_secret,
            "grantType": "refresh_token",
            "refreshToken": tokens.refresh_token,
        },
    ) as response:
        assert response.status == 200


def test_login_targets() -> None:
    assert login_target("builder-id", None, None) == (BUILDER_ID_START_URL, "us-east-1")
    assert login_target("idc", "https://corp.awsapps.com/start", "eu-west-1") == (
        "https://corp.awsapps.com/start",
        "eu-west-1",
    )
    for method, start_url, region in (
        ("idc", None, None),
        ("builder-id", "https://x", None),
        ("idc", "https://x", "evil.example.com/"),
        ("sso", None, None),
    ):
        with pytest.raises(ValueError):
            login_target(method, start_url, region)


def test_the_oidc_endpoint_follows_the_region_only_on_aws() -> None:
    aws = RefreshEndpoints(oidc="https://oidc.us-east-1.amazonaws.com", kiro="https://kiro")
    assert aws.oidc_for("eu-central-1") == "https://oidc.eu-central-1.amazonaws.com"
    assert aws.oidc_for(None) == "https://oidc.us-east-1.amazonaws.com"
    assert RefreshEndpoints(oidc="http://127.0.0.1:9/", kiro="k").oidc_for("eu-central-1") == "http://127.0.0.1:9"
