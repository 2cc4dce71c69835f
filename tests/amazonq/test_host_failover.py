"""Hosts with fallback through the real upstream client and the simulated upstream's hosts (A8 rules):
which answers move a request to the account's next host, which never do, rests, and the body per host."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from q2api.accounts.pool import AccountPool, build_account_pool
from q2api.accounts.refresh import RefreshEndpoints
from q2api.accounts.store import SqliteAccountStore
from q2api.amazonq.attempts import UpstreamTrace
from q2api.amazonq.errors import AccountsBusy, UpstreamHTTPError, UpstreamUnavailable
from q2api.amazonq.host_choice import HostChoice
from q2api.amazonq.host_rests import HostRests
from q2api.amazonq.observer import UpstreamObserver
from q2api.amazonq.upstream import UpstreamClient, UpstreamConfig, create_session
from q2api.server.wiring import web_searcher
from q2api.settings import load_settings
from q2api.testing import scripts
from q2api.testing.simulated_hosts import HostRules
from q2api.testing.simulated_upstream import SIM_CLIENT_ID, SIM_CLIENT_SECRET, SimulatedUpstream
from tests.support.gateway_harness import capture_logs

ENTERPRISE_ARN = "arn:aws:codewhisperer:us-east-1:111111111111:profile/ENTERPRISE"
FAILOVER_LINE = "upstream host failed over:"


def payload(**extra: object) -> dict[str, object]:
    state = {"conversationId": "c-1", "currentMessage": {"userInputMessage": {"content": "hi", "origin": "AI_EDITOR"}}}
    return {"conversationState": {**state, **extra}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Hosts:
    """Three simulated hosts as the done-when scenario has them: gone, runtime-like, q-like."""

    def __init__(self, gone: str, runtime: HostRules, legacy: HostRules) -> None:
        self.gone, self.runtime, self.legacy = gone, runtime, legacy

    @property
    def override(self) -> str:
        return ",".join((self.gone, self.runtime.override_entry, self.legacy.override_entry))


@pytest.fixture
async def sim() -> AsyncIterator[SimulatedUpstream]:
    async with SimulatedUpstream(check_tokens=True) as simulator:
        yield simulator


@pytest.fixture
async def hosts(sim: SimulatedUpstream) -> Hosts:
    return Hosts(sim.gone.url(), await sim.add_host(HostRules.runtime()), await sim.add_host(HostRules.legacy_q()))


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    client = create_session()
    yield client
    await client.close()


async def pool_of(
    tmp_path: Path, sim: SimulatedUpstream, session, *accounts: tuple[str, str | None], access_token: str | None = None
) -> AccountPool:
    """A pool of accounts given as (kind, profile ARN): "social" (Kiro refresh), "idc" (OIDC); each starts
    with `access_token` (its expiry an hour away) when given, else with none (its first use refreshes)."""
    store = SqliteAccountStore(tmp_path)
    for index, (kind, arn) in enumerate(accounts):
        client = (SIM_CLIENT_ID, SIM_CLIENT_SECRET) if kind == "idc" else (None, None)
        await store.add(
            auth_method=kind,
            refresh_token=f"rt-{kind}-{index}",
            label=f"{kind}-{index}",
            client_id=client[0],
            client_secret=client[1],
            profile_arn=arn,
            access_token=access_token,
            expires_at=time.time() + 3600 if access_token else None,
        )
    endpoints = RefreshEndpoints(oidc=sim.oidc_url, kiro=sim.kiro_refresh_url)
    return await build_account_pool(store, session, endpoints=endpoints)


def client_for(pool, session, override: str, *, clock: Clock | None = None, observer=None, **config) -> UpstreamClient:
    options = {"backoff_initial": 0.01, "backoff_max": 0.05, "max_retries": 0, **config}
    rests = HostRests(clock=clock) if clock is not None else None
    observed = observer or UpstreamObserver()
    choice = HostChoice(override, rests=rests, observer=observed)
    return UpstreamClient(session, pool, UpstreamConfig(endpoint=override, **options), observer=observed, hosts=choice)


async def ask(client: UpstreamClient, document: dict[str, object] | None = None) -> str:
    async with client.open_stream(document or payload()) as stream:  # type: ignore[arg-type]
        async for _ in stream.chunks():
            pass
        return stream.host


def failovers(logs) -> list[str]:
    return [line.message for line in logs.lines if line.message.startswith(FAILOVER_LINE)]


def ports(sim: SimulatedUpstream) -> list[int]:
    return [request.port for request in sim.requests]


async def test_a_social_login_is_served_by_the_runtime_host_after_the_gone_one(tmp_path, sim, hosts, session):
    pool = await pool_of(tmp_path, sim, session, ("social", None))
    client = client_for(pool, session, hosts.override)
    with capture_logs() as logs:
        first = await ask(client)
        second = await ask(client)
    runtime = f"127.0.0.1:{hosts.runtime.port}"
    assert first == second == runtime
    gone = hosts.gone.removeprefix("http://").rstrip("/")
    assert failovers(logs) == [f"{FAILOVER_LINE} account=social-0 from={gone} to={runtime} status=unreachable"]
    assert ports(sim) == [hosts.runtime.port] * 2  # the gone host rests: the second request went straight on
    assert all(request.body["profileArn"] == sim.kiro_profile_arn for request in sim.requests)


async def test_an_idc_login_moves_past_the_host_refusing_its_token_kind_once(tmp_path, sim, hosts, session):
    pool = await pool_of(tmp_path, sim, session, ("idc", ENTERPRISE_ARN))
    client = client_for(pool, session, hosts.override)
    with capture_logs() as logs:
        assert await ask(client) == f"127.0.0.1:{hosts.legacy.port}"
        refreshes = sim.refresh_calls
        for _ in range(3):
            assert await ask(client) == f"127.0.0.1:{hosts.legacy.port}"
    lines = failovers(logs)
    assert len(lines) == 2
    assert lines[0].endswith("status=unreachable")
    assert lines[1].endswith(f"from=127.0.0.1:{hosts.runtime.port} to=127.0.0.1:{hosts.legacy.port} status=403")
    # Refused once, refreshed once in case the token had just expired, refused again: then moved on.
    assert hosts.runtime.refused == 2 and hosts.legacy.served == 4
    assert sim.refresh_calls == refreshes  # no more refreshes (nor failovers) while the rests last
    assert ports(sim)[-3:] == [hosts.legacy.port] * 3


async def test_a_builder_id_login_never_sends_a_profileless_request_to_the_runtime_host(tmp_path, sim, session):
    runtime = await sim.add_host(HostRules.runtime())
    legacy = await sim.add_host(HostRules.legacy_q())
    pool = await pool_of(tmp_path, sim, session, ("idc", None))
    client = client_for(pool, session, f"{runtime.override_entry},{legacy.override_entry}")
    with capture_logs() as logs:
        assert await ask(client) == f"127.0.0.1:{legacy.port}"
    assert runtime.served + runtime.refused == 0  # skipped, not failed over: no warning
    assert failovers(logs) == []
    assert "profileArn" not in sim.requests[0].body


async def test_two_accounts_are_served_by_different_hosts_at_once(tmp_path, sim, hosts, session):
    pool = await pool_of(tmp_path, sim, session, ("social", None), ("idc", ENTERPRISE_ARN))
    client = client_for(pool, session, hosts.override)
    await asyncio.gather(*(ask(client) for _ in range(12)))
    calls = [(sim.token_kinds[request.access_token or ""], request.port) for request in sim.requests]
    # Every social request was served by runtime, every IdC one by q; runtime saw IdC tokens only to refuse them.
    assert calls.count(("social", hosts.runtime.port)) == hosts.runtime.served >= 1
    assert calls.count(("idc", hosts.legacy.port)) == hosts.legacy.served >= 1
    assert calls.count(("idc", hosts.runtime.port)) == hosts.runtime.refused
    assert ("social", hosts.legacy.port) not in calls


async def test_the_runtime_host_gets_no_legacy_field_and_the_other_hosts_keep_them(tmp_path, sim, session):
    runtime = await sim.add_host(HostRules.runtime())
    legacy = await sim.add_host(HostRules.legacy_q())
    document = payload(agentTaskType="vibe", agentContinuationId="x")
    document["agentMode"] = "vibe"
    social = await pool_of(tmp_path / "a", sim, session, ("social", None))
    assert await ask(client_for(social, session, runtime.override_entry), document) == f"127.0.0.1:{runtime.port}"
    sent = sim.requests[-1].body
    assert "agentMode" not in sent and "agentTaskType" not in sent["conversationState"]
    assert "agentContinuationId" not in sent["conversationState"] and sent["profileArn"]
    await ask(client_for(social, session, legacy.override_entry), document)
    assert sim.requests[-1].body["agentMode"] == "vibe"
    assert runtime.refused == 0


@pytest.mark.parametrize(
    "reply",
    [
        scripts.http_error(401, "UnauthorizedException", "not here"),
        scripts.http_error(403, "AccessDeniedException", "User is not authorized to make this call."),
        scripts.http_error(404, "UnknownOperationException", "no such route"),
    ],
    ids=["401", "403", "404"],
)
async def test_auth_and_route_shaped_answers_move_to_the_next_host(tmp_path, sim, session, reply):
    first = await sim.add_host(HostRules.legacy_q())
    second = await sim.add_host(HostRules.legacy_q())
    pool = await pool_of(tmp_path, sim, session, ("idc", None))
    client = client_for(pool, session, f"{first.override_entry},{second.override_entry}")
    # A 401 is a rejected token: refreshed once and repeated on the same host before moving on.
    sim.enqueue(*([reply, reply] if reply.status == 401 else [reply]))
    with capture_logs() as logs:
        assert await ask(client) == f"127.0.0.1:{second.port}"
    assert [line.rsplit("status=", 1)[1] for line in failovers(logs)] == [str(reply.status)]


@pytest.mark.parametrize(
    "reply",
    [
        scripts.improperly_formed(),
        scripts.context_overflow(),
        scripts.throttled(),
        scripts.http_error(500, "InternalServerException", "boom"),
        scripts.access_denied(),  # a suspension is the account's, not the host's
    ],
    ids=["400-body", "400-overflow", "429", "500", "403-suspended"],
)
async def test_answers_about_the_request_or_the_account_never_move_to_another_host(tmp_path, sim, session, reply):
    first = await sim.add_host(HostRules.legacy_q())
    second = await sim.add_host(HostRules.legacy_q())
    pool = await pool_of(tmp_path, sim, session, ("idc", None))
    client = client_for(pool, session, f"{first.override_entry},{second.override_entry}")
    sim.enqueue(reply)
    with capture_logs() as logs, pytest.raises(UpstreamHTTPError) as raised:
        await ask(client)
    assert raised.value.status == reply.status
    assert second.served + second.refused == 0
    assert failovers(logs) == []


async def test_the_last_host_unreachable_is_the_requests_failure(tmp_path, sim, session):
    pool = await pool_of(tmp_path, sim, session, ("idc", None))
    client = client_for(pool, session, f"{sim.gone.url()},{sim.gone.url()}")
    with capture_logs() as logs, pytest.raises(UpstreamUnavailable):
        await ask(client)
    assert len(failovers(logs)) == 1  # the first to the second; nothing after the last


async def test_a_host_that_comes_back_after_its_rest_serves_again(tmp_path, sim, session):
    clock = Clock()
    first = await sim.add_host(HostRules(kind="q", refuses_token_kinds=frozenset({"idc"})))
    second = await sim.add_host(HostRules.legacy_q())
    pool = await pool_of(tmp_path, sim, session, ("idc", None))
    client = client_for(pool, session, f"{first.override_entry},{second.override_entry}", clock=clock)
    assert await ask(client) == f"127.0.0.1:{second.port}"
    assert await ask(client) == f"127.0.0.1:{second.port}"  # resting
    first.refuses_token_kinds = frozenset()  # the host is fixed
    clock.now += 59
    assert await ask(client) == f"127.0.0.1:{second.port}"  # still resting
    clock.now += 2
    with capture_logs() as logs:
        assert await ask(client) == f"127.0.0.1:{first.port}"  # tried again after its rest, and served
        assert await ask(client) == f"127.0.0.1:{first.port}"
    assert failovers(logs) == []


async def test_a_host_that_fails_again_after_its_rest_rests_longer(tmp_path, sim, session):
    clock = Clock()
    first = await sim.add_host(HostRules(kind="q", refuses_token_kinds=frozenset({"idc"})))
    second = await sim.add_host(HostRules.legacy_q())
    pool = await pool_of(tmp_path, sim, session, ("idc", None))
    client = client_for(pool, session, f"{first.override_entry},{second.override_entry}", clock=clock)
    await ask(client)
    clock.now += 61
    with capture_logs() as logs:
        await ask(client)  # tried again, failed again: rests 120 s now
    assert len(failovers(logs)) == 1 and failovers(logs)[0].endswith("status=403")
    clock.now += 61
    refused = first.refused
    await ask(client)
    assert first.refused == refused  # still resting after a second minute


async def test_every_call_and_failover_is_counted_per_host(tmp_path, sim, hosts, session):
    attempts: list[tuple[str, str]] = []
    moves: list[tuple[str, str]] = []
    observer = UpstreamObserver(
        host_attempt=lambda host, outcome: attempts.append((host, outcome)),
        host_failover=lambda from_host, to_host: moves.append((from_host, to_host)),
    )
    pool = await pool_of(tmp_path, sim, session, ("idc", ENTERPRISE_ARN))
    client = client_for(pool, session, hosts.override, observer=observer)
    await ask(client)
    runtime, legacy = f"127.0.0.1:{hosts.runtime.port}", f"127.0.0.1:{hosts.legacy.port}"
    gone = hosts.gone.removeprefix("http://").rstrip("/")
    assert attempts == [(gone, "unreachable"), (runtime, "http_403"), (runtime, "http_403"), (legacy, "ok")]
    assert moves == [(gone, runtime), (runtime, legacy)]


async def test_a_host_asking_for_a_profile_the_account_lacks_moves_it_on(tmp_path, sim, session):
    # Named like a legacy host, it is not skipped up front; its 400 "profileArn is required" is the host's
    # rule, not the body's fault (OR PR #13193), so the next host is tried — unlike any other 400.
    strict = await sim.add_host(HostRules(kind="q", requires_profile=True))
    legacy = await sim.add_host(HostRules.legacy_q())
    pool = await pool_of(tmp_path, sim, session, ("idc", None))
    client = client_for(pool, session, f"{strict.override_entry},{legacy.override_entry}")
    with capture_logs() as logs:
        assert await ask(client) == f"127.0.0.1:{legacy.port}"
    assert strict.refused == 1
    assert [line.rsplit("status=", 1)[1] for line in failovers(logs)] == ["400"]


async def test_requests_go_to_the_least_busy_account_and_never_over_its_cap(tmp_path, sim, session):
    pool = await pool_of(tmp_path, sim, session, ("idc", None), ("idc", None))
    client = client_for(pool, session, sim.url, account_max_inflight=2, inflight_wait=0.1)
    sim.responder = lambda record: scripts.stalled_reply(0.3, text_before="ok")
    opened = [client.open_stream(payload()) for _ in range(5)]  # type: ignore[arg-type]
    streams = []
    for reply in opened[:4]:
        streams.append(await reply.__aenter__())
    per_account = sorted(stream.account_id for stream in streams)
    assert len(set(per_account)) == 2 and per_account.count(per_account[0]) == 2  # two each, not 3 + 1
    with pytest.raises(AccountsBusy, match="requests in flight"):
        await opened[4].__aenter__()  # both full: waited briefly, then overloaded
    for reply in opened[:4]:
        await reply.__aexit__(None, None, None)
    assert all(client.inflight.count(stream.account_id) == 0 for stream in streams)  # every slot given back


async def test_web_search_goes_to_the_host_the_accounts_chat_moved_to(tmp_path, sim, session):
    refusing = await sim.add_host(HostRules(kind="q", refuses_token_kinds=frozenset({"idc"})))
    legacy = await sim.add_host(HostRules.legacy_q())
    override = f"{refusing.override_entry},{legacy.override_entry}"
    pool = await pool_of(tmp_path, sim, session, ("idc", None))
    client = client_for(pool, session, override)
    searcher = web_searcher(session, pool, client.hosts, load_settings({"AMAZONQ_ENDPOINT": override}, env_file=None))
    (manager,) = pool.managers()
    await searcher.search("first", account_id=manager.account_id)
    await ask(client)  # the chat fails over from the refusing host to the legacy one
    await searcher.search("second", account_id=manager.account_id)
    hosts_searched = [headers["Host"] for headers, _ in sim.mcp.requests]
    assert hosts_searched == [f"127.0.0.1:{refusing.port}", f"127.0.0.1:{legacy.port}"]


async def test_a_profile_refusal_after_the_refresh_and_repeat_still_moves_the_account_on(tmp_path, sim, session):
    # The token had expired: the host refuses it (403), the gateway refreshes and repeats the call there,
    # and only then does the host say what it thinks of the body: "profileArn is required". That answer
    # is judged like a first one, so the next host is tried, not the 400 relayed as the request's fault.
    strict = await sim.add_host(HostRules(kind="q", requires_profile=True))
    legacy = await sim.add_host(HostRules.legacy_q())
    pool = await pool_of(tmp_path, sim, session, ("idc", None), access_token="expired-access-SECRET")
    client = client_for(pool, session, f"{strict.override_entry},{legacy.override_entry}")
    with capture_logs() as logs:
        assert await ask(client) == f"127.0.0.1:{legacy.port}"
    assert [request.access_token for request in sim.requests][:1] == ["expired-access-SECRET"]
    assert sim.refresh_calls == 1 and strict.refused == 2 and legacy.served == 1
    assert [line.rsplit("status=", 1)[1] for line in failovers(logs)] == ["400"]


async def test_each_host_whose_connections_break_gets_its_own_retries_before_the_walk_moves_on(tmp_path, sim, session):
    first, second = await sim.add_host(HostRules.resetting()), await sim.add_host(HostRules.resetting())
    third = await sim.add_host(HostRules.legacy_q())
    pool = await pool_of(tmp_path, sim, session, ("idc", None))
    override = ",".join(host.override_entry for host in (first, second, third))
    client = client_for(pool, session, override, max_retries=1, backoff_initial=0.01, backoff_max=0.02)
    trace = UpstreamTrace()
    with capture_logs() as logs:
        async with client.open_stream(payload(), trace) as stream:  # type: ignore[arg-type]
            assert stream.host == f"127.0.0.1:{third.port}"
    assert (first.refused, second.refused) == (2, 2)  # the first try and one retry each
    assert [line.rsplit("status=", 1)[1] for line in failovers(logs)] == ["connection_broken"] * 2
    assert [attempt.outcome for attempt in trace.attempts] == ["unreachable"] * 4 + ["ok"]


async def test_the_last_host_whose_connections_break_is_the_requests_failure_after_its_retries(tmp_path, sim, session):
    only = await sim.add_host(HostRules.resetting())
    pool = await pool_of(tmp_path, sim, session, ("idc", None))
    client = client_for(pool, session, only.override_entry, max_retries=2, backoff_initial=0.01, backoff_max=0.02)
    with capture_logs() as logs, pytest.raises(UpstreamUnavailable):
        await ask(client)
    assert only.refused == 3 and failovers(logs) == []
