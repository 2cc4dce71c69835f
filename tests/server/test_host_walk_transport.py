"""Issue 31 item 3 through the running gateway, the simulated Amazon Q and the official SDK: a host that
resets every connection is retried as before, then left for the account's next host (one WARNING, the
switch counted by reason on /metrics) instead of a 502; a Kiro API key whose first hosts answer 404
and 403 is added (admin API; `q2api accounts add`: tests/cli/test_api_key_host_walk.py) and serves on
the host that takes it."""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx2
import pytest

from q2api.server import metrics
from q2api.settings import load_settings
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_hosts import HostRules
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import ADMIN_KEY, CLIENT_KEY, ask, capture_logs, gateway_settings, sdk
from tests.support.metrics_scrape import Scrape

API_KEY = "ksk_walk-7e6d5c4b3a2918f0e1d2c3b4a5968778"
FAILOVER_LINE = "upstream host failed over:"
KEY_CHECK_LINE = "API key check moved to the next host:"


def host_name(url: str) -> str:
    return url.removeprefix("http://").split("/", 1)[0]


async def test_a_host_that_resets_every_connection_is_left_for_the_next_host_after_its_retries(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim:
        resetting = await sim.add_host(HostRules.resetting())
        healthy = await sim.add_host(HostRules.legacy_q())
        endpoint = f"{resetting.override_entry},{healthy.override_entry}"
        settings = gateway_settings(
            sim, tmp_path, AMAZONQ_ENDPOINT=endpoint, Q2API_MAX_RETRIES="2", Q2API_MODEL_DISCOVERY="false"
        )
        reset_name, healthy_name = host_name(resetting.url), host_name(healthy.url)
        metrics.UPSTREAM_HOST_FAILOVERS.labels(from_host=reset_name, to_host=healthy_name).inc()
        with capture_logs() as logs:
            async with running_gateway(settings) as url, httpx2.AsyncClient(base_url=url) as http, sdk(url) as client:
                before = Scrape((await http.get("/metrics")).text)
                assert "first" in await ask(client, "first")
                assert "streamed" in await ask(client, "streamed", stream=True)
                scrape = Scrape((await http.get("/metrics")).text).since(before)

    # Its retries first (1 + Q2API_MAX_RETRIES calls), then the next host; the second request starts
    # on the healthy host, the resetting one resting.
    assert scrape.value("q2api_upstream_host_attempts_total", host=reset_name, outcome="unreachable") == 3
    assert [request.port for request in sim.requests] == [healthy.port, healthy.port]
    warnings = [line for line in logs.lines if line.message.startswith(FAILOVER_LINE)]
    assert [line.message for line in warnings] == [
        f"{FAILOVER_LINE} account=environment from={reset_name} to={healthy_name} status=connection_broken"
    ]
    assert warnings[0].level == "WARNING"
    retries = [line for line in logs.lines if line.message.startswith("retrying the Amazon Q request")]
    assert len(retries) == 2  # the same host, tried again as before the walk existed
    assert scrape.value("q2api_upstream_host_switches_total", reason="connection_broken") == 1
    assert scrape.value("q2api_upstream_host_failovers_total", from_host=reset_name, to_host=healthy_name) == 1


async def test_a_resetting_host_alone_still_answers_502_once_its_retries_are_spent(tmp_path: Path) -> None:
    async with SimulatedUpstream() as sim:
        resetting = await sim.add_host(HostRules.resetting())
        settings = gateway_settings(
            sim,
            tmp_path,
            AMAZONQ_ENDPOINT=resetting.override_entry,
            Q2API_MAX_RETRIES="1",
            Q2API_MODEL_DISCOVERY="false",
        )
        async with running_gateway(settings) as url, sdk(url) as client:
            with pytest.raises(anthropic.APIStatusError) as caught:
                await ask(client, "nowhere to go")
    assert caught.value.status_code == 502
    assert sim.calls["/"] >= 2 and sim.requests == []  # the calls were reset before reaching the handler


async def test_an_api_key_whose_first_hosts_answer_404_and_403_is_added_and_serves_on_the_host_that_takes_it(
    tmp_path: Path,
) -> None:
    async with SimulatedUpstream(check_tokens=True) as sim:
        sim.add_api_key(API_KEY)
        not_found = await sim.add_host(HostRules.not_found())
        refusing = await sim.add_host(HostRules.refusing("api_key"))  # as the runtime host refuses keys (A8.3)
        taking = await sim.add_host(HostRules.legacy_q())
        endpoint = ",".join(host.override_entry for host in (not_found, refusing, taking))
        names = [host_name(host.url) for host in (not_found, refusing, taking)]
        settings = load_settings(
            {
                "AMAZONQ_ENDPOINT": endpoint,
                "AMAZONQ_OIDC_ENDPOINT": sim.oidc_url,
                "Q2API_DATA_DIR": str(tmp_path),
                "Q2API_API_KEYS": CLIENT_KEY,
                "Q2API_ADMIN_KEY": ADMIN_KEY,
                "Q2API_MODEL_DISCOVERY": "false",
            },
            env_file=None,
        )
        for host in names:  # this process's metrics may hold counts of earlier gateways on these ports
            metrics.UPSTREAM_HOST_FAILOVERS.labels(from_host=names[0], to_host=host).inc()
        with capture_logs() as logs:
            async with (
                running_gateway(settings) as url,
                httpx2.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=20) as admin,
            ):
                added = await admin.post("/admin/api/accounts", json={"label": "key", "api_key": API_KEY})
                assert added.status_code == 201, added.text
                assert API_KEY not in added.text
                async with sdk(url) as client:
                    assert "served by the third host" in await ask(client, "served by the third host")
                    assert "and again" in await ask(client, "and again")

    checks = [line.message for line in logs.lines if line.message.startswith(KEY_CHECK_LINE)]
    assert checks == [
        f"{KEY_CHECK_LINE} account=key from={names[0]} to={names[1]} status=404",
        f"{KEY_CHECK_LINE} account=key from={names[1]} to={names[2]} status=403",
    ]
    # Serving walks the same hosts, once: whichever call came first (the joined account's catalogue
    # read, or its first chat) moved it on, and every later call goes straight to the host that takes it.
    switches = [line.message for line in logs.lines if line.message.startswith(FAILOVER_LINE)]
    assert switches == [
        f"{FAILOVER_LINE} account=key from={names[0]} to={names[1]} status=404",
        f"{FAILOVER_LINE} account=key from={names[1]} to={names[2]} status=403",
    ]
    assert {request.port for request in sim.requests} <= {refusing.port, taking.port}
    assert taking.served == 2  # both replies
    assert API_KEY not in logs.text


async def test_an_amazonq_api_key_walks_past_a_404_and_a_403_host_to_the_one_that_takes_it(tmp_path: Path) -> None:
    async with SimulatedUpstream(check_tokens=True) as sim:
        sim.add_api_key(API_KEY)
        hosts = [
            await sim.add_host(rules)
            for rules in (HostRules.not_found(), HostRules.refusing("api_key"), HostRules.legacy_q())
        ]
        settings = load_settings(
            {
                "AMAZONQ_ENDPOINT": ",".join(host.override_entry for host in hosts),
                "AMAZONQ_API_KEY": API_KEY,
                "Q2API_DATA_DIR": str(tmp_path),
                "Q2API_API_KEYS": CLIENT_KEY,
                "Q2API_MODEL_DISCOVERY": "false",
            },
            env_file=None,
        )
        with capture_logs() as logs:
            async with running_gateway(settings) as url, sdk(url) as client:
                assert "an environment key" in await ask(client, "an environment key")
                assert "streamed" in await ask(client, "streamed", stream=True)
    names = [host_name(host.url) for host in hosts]
    switches = [line.message for line in logs.lines if line.message.startswith(FAILOVER_LINE)]
    assert switches == [
        f"{FAILOVER_LINE} account=environment from={names[0]} to={names[1]} status=404",
        f"{FAILOVER_LINE} account=environment from={names[1]} to={names[2]} status=403",
    ]
    assert hosts[2].served == 2
    assert API_KEY not in logs.text


async def test_an_api_keys_catalogue_and_credits_are_read_from_the_host_that_takes_it(tmp_path: Path) -> None:
    async with SimulatedUpstream(check_tokens=True) as sim:
        sim.add_api_key(API_KEY)
        hosts = [
            await sim.add_host(rules)
            for rules in (HostRules.not_found(), HostRules.refusing("api_key"), HostRules.legacy_q())
        ]
        settings = load_settings(
            {
                "AMAZONQ_ENDPOINT": ",".join(host.override_entry for host in hosts),
                "AMAZONQ_API_KEY": API_KEY,
                "Q2API_DATA_DIR": str(tmp_path),
                "Q2API_API_KEYS": CLIENT_KEY,
            },
            env_file=None,
        )
        with capture_logs() as logs:
            async with running_gateway(settings) as url, sdk(url) as client:
                assert "after discovery" in await ask(client, "after discovery")
    # Discovery walked the hosts at start-up: the catalogue was read (no fallback to the built-in
    # table) and the chat went straight to the host that takes the key.
    assert not any("model catalogue unavailable" in line.message for line in logs.lines)
    assert any(line.message.startswith("model catalogue read:") for line in logs.lines)
    assert [request.port for request in sim.requests] == [hosts[2].port]
    names = [host_name(host.url) for host in hosts]
    switches = {line.message for line in logs.lines if line.message.startswith(FAILOVER_LINE)}
    assert switches == {
        f"{FAILOVER_LINE} account=environment from={names[0]} to={names[1]} status=404",
        f"{FAILOVER_LINE} account=environment from={names[1]} to={names[2]} status=403",
    }
    assert API_KEY not in logs.text
