from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from q2api.accounts.pool import AccountPool, build_account_pool
from q2api.accounts.records import ENV_ACCOUNT_ID
from q2api.accounts.store import SqliteAccountStore
from q2api.amazonq.errors import (
    FailureKind,
    NoAccountConfigured,
    UpstreamHTTPError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from q2api.amazonq.eventstream import EventStreamDecoder
from q2api.amazonq.upstream import TARGET, UpstreamClient, UpstreamConfig, create_session
from q2api.server.wiring import env_account, refresh_endpoints
from q2api.settings import load_settings
from q2api.testing import scripts
from q2api.testing.simulated_upstream import SIM_PROFILE_ARN, SIM_REFRESH_TOKEN, SimulatedUpstream

PAYLOAD = {"conversationState": {"currentMessage": {"userInputMessage": {"content": "hi", "origin": "AI_EDITOR"}}}}


@pytest.fixture
async def sim() -> AsyncIterator[SimulatedUpstream]:
    async with SimulatedUpstream(check_tokens=True) as simulator:
        yield simulator


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    client = create_session()
    yield client
    await client.close()


async def make_pool(
    tmp_path: Path, sim: SimulatedUpstream, session, auth_method: str = "idc", **env: str
) -> AccountPool:
    settings = load_settings({**sim.env(auth_method), "Q2API_DATA_DIR": str(tmp_path), **env}, env_file=None)
    return await build_account_pool(
        SqliteAccountStore(settings.data_dir),
        session,
        endpoints=refresh_endpoints(settings),
        seed=env_account(settings),
    )


def make_client(
    pool: AccountPool, sim: SimulatedUpstream, session, endpoint: str | None = None, **config
) -> UpstreamClient:
    options = {"backoff_initial": 0.01, "backoff_max": 0.05, **config}
    return UpstreamClient(session, pool, UpstreamConfig(endpoint=endpoint or sim.url, **options))


async def read_all(stream) -> bytes:
    return b"".join([chunk async for chunk in stream.chunks()])


def events_of(data: bytes) -> list[tuple[str, bytes]]:
    decoder = EventStreamDecoder()
    frames = decoder.feed(data)
    decoder.close()
    return [(frame.event_type, frame.payload) for frame in frames]


async def test_streams_a_reply_with_the_documented_request(tmp_path: Path, sim, session) -> None:
    sim.enqueue(scripts.text_reply("Hello world", chunks=3))
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    payload = {"conversationState": dict(PAYLOAD["conversationState"])}
    async with client.open_stream(payload) as stream:
        body = await read_all(stream)
        assert stream.request_id and stream.attempts == 1 and stream.account_id == ENV_ACCOUNT_ID
        assert stream.time_to_headers >= 0
    texts = [payload for event_type, payload in events_of(body) if event_type == "assistantResponseEvent"]
    assert texts == [b'{"content":"Hell"}', b'{"content":"o wo"}', b'{"content":"rld"}']

    request = sim.requests[0]
    assert request.headers["Content-Type"] == "application/x-amz-json-1.0"
    assert request.headers["X-Amz-Target"] == TARGET
    assert request.headers["x-amzn-codewhisperer-optout"] == "true"
    assert request.access_token in sim.valid_access_tokens
    assert request.body == PAYLOAD  # no profileArn for an IdC account without one
    assert payload == PAYLOAD  # the caller's dict is not modified


async def test_profile_arn_is_added_for_social_accounts(tmp_path: Path, sim, session) -> None:
    client = make_client(await make_pool(tmp_path, sim, session, auth_method="social"), sim, session)
    async with client.open_stream(PAYLOAD) as stream:
        await read_all(stream)
    assert sim.requests[0].body == {**PAYLOAD, "profileArn": SIM_PROFILE_ARN}


async def test_retries_server_errors_then_succeeds(tmp_path: Path, sim, session) -> None:
    sim.enqueue(scripts.server_error(), scripts.service_unavailable(), scripts.text_reply("ok"))
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    async with client.open_stream(PAYLOAD) as stream:
        await read_all(stream)
        assert stream.attempts == 3
    assert len(sim.requests) == 3


async def test_upstream_text_with_braces_does_not_break_logging(tmp_path: Path, sim, session, log_lines) -> None:
    sim.enqueue(scripts.http_error(500, "InternalServerException", "boom {0} {missing}"), scripts.text_reply("ok"))
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    async with client.open_stream(PAYLOAD) as stream:
        assert stream.attempts == 2
    assert any("boom {0} {missing}" in line for line in log_lines)


async def test_retries_throttling_then_succeeds(tmp_path: Path, sim, session) -> None:
    sim.enqueue(scripts.throttled(), scripts.model_overloaded(), scripts.text_reply("ok"))
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    async with client.open_stream(PAYLOAD) as stream:
        assert stream.attempts == 3
    assert len(sim.requests) == 3


async def test_retries_a_dropped_connection_then_succeeds(tmp_path: Path, sim, session) -> None:
    sim.enqueue(scripts.hangup(), scripts.text_reply("ok"))
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    async with client.open_stream(PAYLOAD) as stream:
        assert stream.attempts == 2
        assert b"ok" in await read_all(stream)
    assert len(sim.requests) == 2


async def test_gives_up_after_max_retries(tmp_path: Path, sim, session) -> None:
    sim.enqueue(*[scripts.server_error(503)] * 5)
    client = make_client(await make_pool(tmp_path, sim, session), sim, session, max_retries=2)
    with pytest.raises(UpstreamHTTPError) as caught:
        async with client.open_stream(PAYLOAD):
            pass
    assert caught.value.status == 503 and caught.value.code == "InternalServerException"
    assert len(sim.requests) == 3


async def test_connection_refused_is_unavailable_after_retries(tmp_path: Path, sim, session) -> None:
    client = make_client(
        await make_pool(tmp_path, sim, session), sim, session, endpoint="http://127.0.0.1:9/", max_retries=1
    )
    with pytest.raises(UpstreamUnavailable, match="cannot reach Amazon Q"):
        async with client.open_stream(PAYLOAD):
            pass


@pytest.mark.parametrize(
    ("reply", "status", "code", "reason", "kind"),
    [
        (scripts.improperly_formed(), 400, "ValidationException", None, FailureKind.BAD_REQUEST),
        (
            scripts.context_overflow(),
            400,
            "ValidationException",
            "CONTENT_LENGTH_EXCEEDS_THRESHOLD",
            FailureKind.CONTEXT_OVERFLOW,
        ),
        (scripts.monthly_quota(), 400, "ThrottlingException", "MONTHLY_REQUEST_COUNT", FailureKind.MONTHLY_QUOTA),
        (scripts.access_denied(), 403, "AccessDeniedException", "TEMPORARILY_SUSPENDED", FailureKind.ACCESS_DENIED),
    ],
)
async def test_client_side_failures_are_not_retried(
    tmp_path: Path, sim, session, reply, status, code, reason, kind
) -> None:
    sim.enqueue(reply, scripts.text_reply("must not be reached"))
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    with pytest.raises(UpstreamHTTPError) as caught:
        async with client.open_stream(PAYLOAD):
            pass
    error = caught.value
    assert (error.status, error.code, error.reason, error.kind) == (status, code, reason, kind)
    assert error.request_id and error.message
    assert len(sim.requests) == 1


async def test_error_code_from_namespaced_type_without_header(tmp_path: Path, sim, session) -> None:
    sim.enqueue(scripts.http_error(400, "ValidationException", "Improperly formed request.", header=False))
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    with pytest.raises(UpstreamHTTPError) as caught:
        async with client.open_stream(PAYLOAD):
            pass
    assert caught.value.code == "ValidationException"
    assert caught.value.message == "Improperly formed request."


async def test_long_retry_after_is_returned_not_waited_for(tmp_path: Path, sim, session) -> None:
    sim.enqueue(scripts.throttled(retry_after=60), scripts.text_reply("not reached"))
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    with pytest.raises(UpstreamHTTPError) as caught:
        async with client.open_stream(PAYLOAD):
            pass
    assert caught.value.retry_after == 60 and caught.value.kind is FailureKind.THROTTLED
    assert len(sim.requests) == 1


async def test_rejected_bearer_token_is_refreshed_once_and_retried(tmp_path: Path, sim, session, log_lines) -> None:
    pool = await make_pool(tmp_path, sim, session, AMAZONQ_ACCESS_TOKEN="stale-access-SECRET")
    client = make_client(pool, sim, session)
    async with client.open_stream(PAYLOAD) as stream:
        await read_all(stream)
        assert stream.attempts == 1
    assert next(request.access_token for request in sim.requests) == "stale-access-SECRET"
    assert sim.requests[1].access_token in sim.valid_access_tokens
    assert sim.refresh_calls == 1 and len(sim.requests) == 2
    joined = "\n".join(log_lines)
    for secret in ("stale-access-SECRET", SIM_REFRESH_TOKEN, *sim.valid_access_tokens):
        assert secret not in joined


async def test_bearer_rejected_twice_surfaces_as_403(tmp_path: Path, sim, session) -> None:
    sim.enqueue(scripts.bearer_invalid(), scripts.bearer_invalid(), scripts.text_reply("not reached"))
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    with pytest.raises(UpstreamHTTPError) as caught:
        async with client.open_stream(PAYLOAD):
            pass
    assert caught.value.status == 403 and caught.value.kind is FailureKind.BEARER_INVALID
    assert len(sim.requests) == 2
    assert sim.refresh_calls == 2  # the initial token, then one refresh after the rejection


async def test_first_byte_timeout(tmp_path: Path, sim, session) -> None:
    sim.enqueue(scripts.slow_headers(5))
    client = make_client(await make_pool(tmp_path, sim, session), sim, session, first_byte_timeout=0.2)
    with pytest.raises(UpstreamTimeout) as caught:
        async with client.open_stream(PAYLOAD):
            pass
    assert caught.value.phase == "first_byte"
    assert len(sim.requests) == 1  # a slow model is not asked twice
    assert await sim.wait_until(lambda: sim.disconnects == 1)


async def test_between_frames_timeout(tmp_path: Path, sim, session) -> None:
    sim.enqueue(scripts.stalled_reply(5))
    client = make_client(await make_pool(tmp_path, sim, session), sim, session, read_timeout=0.2)
    with pytest.raises(UpstreamTimeout) as caught:
        async with client.open_stream(PAYLOAD) as stream:
            await read_all(stream)
    assert caught.value.phase == "between_frames"
    assert await sim.wait_until(lambda: sim.disconnects == 1)


async def test_connection_dropped_mid_reply_is_unavailable(tmp_path: Path, sim, session) -> None:
    sim.enqueue(scripts.dropped_reply())
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    with pytest.raises(UpstreamUnavailable, match="mid-reply"):
        async with client.open_stream(PAYLOAD) as stream:
            await read_all(stream)
    assert len(sim.requests) == 1  # the reply had begun: no retry


async def test_early_exit_closes_the_upstream_connection(tmp_path: Path, sim, session) -> None:
    sim.enqueue(scripts.text_reply("x" * 200, chunks=100, delay=0.02))
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    async with client.open_stream(PAYLOAD) as stream:
        chunks = stream.chunks()
        await chunks.__anext__()
    assert await sim.wait_until(lambda: sim.disconnects == 1)
    assert await sim.wait_until(lambda: sim.open_connections == 0)
    assert sim.streams_completed == 0


async def test_cancelled_consumer_closes_the_upstream_connection(tmp_path: Path, sim, session) -> None:
    sim.enqueue(scripts.stalled_reply(30))
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    first_chunk = asyncio.Event()

    async def consume() -> None:
        async with client.open_stream(PAYLOAD) as stream:
            async for _ in stream.chunks():
                first_chunk.set()

    task = asyncio.ensure_future(consume())
    await first_chunk.wait()
    task.cancel()  # what a client disconnect does to the request task
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await sim.wait_until(lambda: sim.disconnects == 1)
    assert await sim.wait_until(lambda: sim.open_connections == 0)


async def test_fully_read_reply_keeps_the_connection_for_reuse(tmp_path: Path, sim, session) -> None:
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    for _ in range(3):
        async with client.open_stream(PAYLOAD) as stream:
            await read_all(stream)
    assert sim.disconnects == 0 and sim.streams_completed == 3
    assert sim.open_connections == 1  # one keep-alive connection served all three


def test_session_has_no_pool_limit_and_leaves_proxies_to_the_callers() -> None:
    async def check() -> None:
        session = create_session()
        try:
            # trust_env would look up ~/.netrc in a thread on every request; proxies are
            # resolved once per URL instead (q2api.amazonq.proxy, tested below).
            assert session.trust_env is False
            assert session.connector.limit == 0
        finally:
            await session.close()

    asyncio.run(check())


async def test_http_proxy_from_the_environment_is_used(tmp_path: Path, sim, monkeypatch) -> None:
    pool_session = create_session()
    pool = await make_pool(tmp_path, sim, pool_session)
    await pool.managers()[0].access_token()  # refresh before the proxy is configured
    monkeypatch.setenv("HTTP_PROXY", sim.base_url)
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    proxied = create_session()
    try:
        client = make_client(pool, sim, proxied, endpoint="http://q.nowhere.invalid/")
        async with client.open_stream(PAYLOAD) as stream:
            await read_all(stream)
    finally:
        await proxied.close()
        await pool_session.close()
    # The request reached the simulator acting as proxy, addressed to the real host.
    assert sim.requests[-1].headers["Host"] == "q.nowhere.invalid"


async def test_many_concurrent_streams_share_one_session(tmp_path: Path, sim, session) -> None:
    client = make_client(await make_pool(tmp_path, sim, session), sim, session)
    sim.responder = lambda request: scripts.text_reply("y" * 20, chunks=5, delay=0.01)

    async def one() -> bytes:
        async with client.open_stream(PAYLOAD) as stream:
            return await read_all(stream)

    bodies = await asyncio.gather(*(one() for _ in range(150)))  # more than aiohttp's default pool of 100
    assert all(b"yyyy" in body for body in bodies)
    assert sim.streams_completed == 150


async def test_no_account_configured(tmp_path: Path, sim, session) -> None:
    client = make_client(AccountPool([]), sim, session)
    with pytest.raises(NoAccountConfigured, match="q2api accounts import"):
        async with client.open_stream(PAYLOAD):
            pass
    assert sim.requests == []


# -- several accounts -------------------------------------------------------------


async def two_account_pool(tmp_path: Path, sim, session) -> AccountPool:
    store = SqliteAccountStore(tmp_path)
    await store.add(auth_method="social", refresh_token="first-SECRET", account_id="a", label="first")
    await store.add(auth_method="social", refresh_token="second-SECRET", account_id="b", label="second")
    settings = load_settings(
        {**sim.env("social"), "AMAZONQ_REFRESH_TOKEN": "", "Q2API_DATA_DIR": str(tmp_path)}, env_file=None
    )
    return await build_account_pool(store, session, endpoints=refresh_endpoints(settings), seed=env_account(settings))


async def test_throttled_account_rests_and_the_retry_uses_another(tmp_path: Path, sim, session, log_lines) -> None:
    pool = await two_account_pool(tmp_path, sim, session)
    client = make_client(pool, sim, session, backoff_initial=5, backoff_max=5)
    sim.enqueue(scripts.throttled(), scripts.text_reply("from the other"))
    async with client.open_stream(PAYLOAD) as stream:
        first_account = {"a", "b"} - {stream.account_id}
        assert stream.attempts == 2
    retries = [line for line in log_lines if "retrying the Amazon Q request" in line]
    assert len(retries) == 1 and "'wait': 0.0" in retries[0]  # switched accounts without backing off
    health = {view.account_id: view.health for view in pool.health()}
    assert health[first_account.pop()] == "throttled"
    # The next requests avoid the resting account.
    for _ in range(2):
        async with client.open_stream(PAYLOAD) as again:
            assert again.account_id == stream.account_id


async def test_monthly_quota_moves_to_another_account(tmp_path: Path, sim, session) -> None:
    pool = await two_account_pool(tmp_path, sim, session)
    client = make_client(pool, sim, session)
    sim.enqueue(scripts.monthly_quota(), scripts.text_reply("served"))
    async with client.open_stream(PAYLOAD) as stream:
        assert b"served" in await read_all(stream)
    assert len(sim.requests) == 2
    assert sorted(view.health for view in pool.health()) == ["quota_exhausted", "ready"]


async def test_accounts_take_turns(tmp_path: Path, sim, session) -> None:
    client = make_client(await two_account_pool(tmp_path, sim, session), sim, session)
    served = []
    for _ in range(4):
        async with client.open_stream(PAYLOAD) as stream:
            served.append(stream.account_id)
    assert served.count("a") == 2 and served.count("b") == 2


async def test_dead_account_is_skipped_for_a_working_one(tmp_path: Path, sim, session) -> None:
    sim.valid_refresh_tokens = {"second-SECRET"}
    client = make_client(await two_account_pool(tmp_path, sim, session), sim, session)
    for _ in range(2):
        async with client.open_stream(PAYLOAD) as stream:
            assert stream.account_id == "b"
