"""Issue 20's done-when scenario through the running gateway and the official SDK: three simulated hosts —
the first gone, the second refusing IdC tokens and API keys (a runtime host), the third taking every
kind — and a social, an IdC and a Kiro API-key account: all are served, each on its right host, with
one WARNING per switch and none afterwards while the rests last; the request line names the host,
/metrics counts per host."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2

from q2api.accounts.store import SqliteAccountStore
from q2api.server import metrics
from q2api.settings import load_settings
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_hosts import HostRules
from q2api.testing.simulated_upstream import SIM_CLIENT_ID, SIM_CLIENT_SECRET, SimulatedUpstream
from tests.support.gateway_harness import CLIENT_KEY, capture_logs, sdk, user
from tests.support.metrics_scrape import Scrape

ENTERPRISE_ARN = "arn:aws:codewhisperer:us-east-1:111111111111:profile/ENTERPRISE"
API_KEY = "ksk_hosts-scenario-5e4d3c2b1a"
FAILOVER_LINE = "upstream host failed over:"


def host_name(url: str) -> str:
    """How the metrics and the log name a host: `127.0.0.1:PORT`."""
    return url.removeprefix("http://").split("/", 1)[0]


@contextlib.asynccontextmanager
async def gateway_on(sim: SimulatedUpstream, data_dir: Path, endpoint: str) -> AsyncIterator[str]:
    store = SqliteAccountStore(data_dir)
    await store.add(auth_method="social", refresh_token="rt-social", label="social")
    await store.add(
        auth_method="idc",
        refresh_token="rt-idc",
        label="idc",
        client_id=SIM_CLIENT_ID,
        client_secret=SIM_CLIENT_SECRET,
        profile_arn=ENTERPRISE_ARN,
    )
    # A Kiro API key: sent with `tokentype: API_KEY`, no profile, so the runtime host is never tried.
    sim.add_api_key(API_KEY)
    sim.token_kinds[API_KEY] = "api_key"
    await store.add(auth_method="api_key", refresh_token=None, access_token=API_KEY, label="key")
    settings = load_settings(
        {
            "AMAZONQ_ENDPOINT": endpoint,
            "AMAZONQ_OIDC_ENDPOINT": sim.oidc_url,
            "AMAZONQ_KIRO_REFRESH_ENDPOINT": sim.kiro_refresh_url,
            "Q2API_DATA_DIR": str(data_dir),
            "Q2API_API_KEYS": CLIENT_KEY,
            "Q2API_MODEL_DISCOVERY": "false",
        },
        env_file=None,
    )
    async with running_gateway(settings) as url:
        yield url


async def test_social_idc_and_api_key_accounts_are_served_on_their_hosts_with_one_warning_per_switch(tmp_path):
    async with SimulatedUpstream(check_tokens=True) as sim:
        runtime = await sim.add_host(HostRules.runtime())
        legacy = await sim.add_host(HostRules.legacy_q())
        gone = sim.gone.url()
        endpoint = ",".join((gone, runtime.override_entry, legacy.override_entry))
        # The OS hands ports out again: an earlier test's gateway in this process may have counted
        # calls to a host on one of these very ports, into the same metrics. Here, one had.
        for host in (host_name(gone), f"127.0.0.1:{runtime.port}", f"127.0.0.1:{legacy.port}"):
            metrics.UPSTREAM_HOST_ATTEMPTS.labels(host=host, outcome="ok").inc()
            metrics.UPSTREAM_HOST_FAILOVERS.labels(from_host=host_name(gone), to_host=host).inc()
        with capture_logs() as logs:
            async with gateway_on(sim, tmp_path, endpoint) as url, httpx2.AsyncClient(base_url=url) as http:
                # This process's metrics: earlier tests' gateways counted into them, on ports that may be these.
                before = Scrape((await http.get("/metrics")).text)
                client = sdk(url)
                for round_ in range(9):
                    message = await client.messages.create(
                        model="claude-sonnet-5-5", max_tokens=32, messages=[user(f"hi {round_}")]
                    )
                    assert message.content[0].text
                scrape = Scrape((await http.get("/metrics")).text).since(before)

    gone_name = host_name(gone)
    runtime_name, legacy_name = f"127.0.0.1:{runtime.port}", f"127.0.0.1:{legacy.port}"
    warnings = sorted(line.message for line in logs.lines if line.message.startswith(FAILOVER_LINE))
    assert warnings == sorted(
        [
            f"{FAILOVER_LINE} account=social from={gone_name} to={runtime_name} status=unreachable",
            f"{FAILOVER_LINE} account=idc from={gone_name} to={runtime_name} status=unreachable",
            f"{FAILOVER_LINE} account=idc from={runtime_name} to={legacy_name} status=403",
            f"{FAILOVER_LINE} account=key from={gone_name} to={legacy_name} status=unreachable",
        ]
    )
    assert all(line.level == "WARNING" for line in logs.lines if line.message.startswith(FAILOVER_LINE))
    # Each account on its right host: social tokens only on runtime, IdC tokens served only by q.
    served = [(sim.token_kinds[request.access_token or ""], request.port) for request in sim.requests]
    assert {port for kind, port in served if kind == "social"} == {runtime.port}
    assert runtime.served == served.count(("social", runtime.port)) >= 1
    assert served.count(("idc", legacy.port)) >= 1 and served.count(("api_key", legacy.port)) >= 1
    assert legacy.served == served.count(("idc", legacy.port)) + served.count(("api_key", legacy.port))
    assert {port for kind, port in served if kind == "api_key"} == {legacy.port}  # never runtime
    assert all(
        request.headers.get("tokentype") == "API_KEY" for request in sim.requests if request.access_token == API_KEY
    )
    assert runtime.refused == served.count(("idc", runtime.port)) == 2  # refused, refreshed, refused: then rested
    # The request line names the host that served each reply.
    hosts_named = {line.extra["upstream_host"] for line in logs.request_lines()}
    assert hosts_named == {runtime_name, legacy_name}
    assert scrape.value("q2api_upstream_host_failovers_total", from_host=gone_name, to_host=runtime_name) == 2
    assert scrape.value("q2api_upstream_host_failovers_total", from_host=gone_name, to_host=legacy_name) == 1
    assert scrape.value("q2api_upstream_host_failovers_total", from_host=runtime_name, to_host=legacy_name) == 1
    assert scrape.total("q2api_upstream_host_attempts_total", host=legacy_name, outcome="ok") == legacy.served
