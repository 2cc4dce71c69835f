"""Per-account catalogues and credits (`AccountDiscovery`) against the simulator, and the pool's
routing by model: fallbacks with warnings, exhausted credits, caching."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from q2api.accounts.discovery import ON_DEMAND_MIN_INTERVAL, AccountDiscovery
from q2api.accounts.pool import AccountPool
from q2api.accounts.store import SqliteAccountStore
from q2api.accounts.tokens import TokenManager
from q2api.amazonq.catalogue import CatalogueSource
from q2api.amazonq.observer import UpstreamObserver
from q2api.amazonq.service_api import ServiceApi
from q2api.amazonq.upstream import create_session
from q2api.models.table import builtin_catalogue
from q2api.testing import scripts
from q2api.testing.simulated_services import catalogue_entry, usage_document
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import capture_logs


async def _no_refresh(account):  # pragma: no cover - the tokens below are valid for an hour
    raise AssertionError("no refresh expected")


async def managers(tmp_path: Path, sim: SimulatedUpstream, count: int) -> list[TokenManager]:
    """Accounts acc0.. holding valid access tokens that the simulator knows as accounts rt0.."""
    store = SqliteAccountStore(tmp_path)
    result = []
    for index in range(count):
        account = await store.add(auth_method="social", refresh_token=f"rt{index}", account_id=f"acc{index}")
        await store.save_tokens(account.id, access_token=f"tok{index}", expires_at=time.time() + 3600)
        sim.token_accounts[f"tok{index}"] = f"rt{index}"
        result.append(TokenManager(await store.get(account.id), store, _no_refresh))
    return result


async def test_a_failed_read_keeps_the_last_good_catalogue_then_the_builtin_table(tmp_path):
    async with SimulatedUpstream() as sim, create_session() as session:
        sim.services.catalogue_by_account = {"rt0": [catalogue_entry("claude-opus-4.6")]}
        pool = AccountPool(await managers(tmp_path, sim, 2))
        discovery = AccountDiscovery(pool, ServiceApi(session, sim.url), fallback=builtin_catalogue())
        sim.services.failure = scripts.server_error(500)
        with capture_logs() as logs:
            await discovery.refresh_catalogues()
        # Never answered: the built-in table, with a warning per account.
        assert discovery.account_catalogue("acc0").source is CatalogueSource.BUILT_IN
        assert [line.level for line in logs.lines if "using the built-in model table" in line.message] == [
            "WARNING"
        ] * 2

        sim.services.failure = None
        await discovery.refresh_catalogues()
        assert discovery.account_catalogue("acc0").ids == ("claude-opus-4.6",)
        assert discovery.account_catalogue("acc1").ids == builtin_catalogue().ids  # the simulator's default list

        sim.services.failure = scripts.throttled()
        with capture_logs() as logs:
            await discovery.refresh_catalogues()
        kept = discovery.account_catalogue("acc0")
        assert (kept.ids, kept.source) == (("claude-opus-4.6",), CatalogueSource.LAST_GOOD)
        assert any(line.level == "WARNING" and "keeping the one read at" in line.message for line in logs.lines)
        # The pool still routes by the kept catalogue.
        assert pool.pick(model="claude-opus-4.6").account_id == "acc0"
        assert pool.pick(model="claude-sonnet-5.5").account_id == "acc1"


async def test_the_merged_catalogue_follows_every_read_and_is_built_once_per_change(tmp_path):
    async with SimulatedUpstream() as sim, create_session() as session:
        sim.services.catalogue_by_account = {"rt0": [catalogue_entry("claude-opus-4.6")]}
        pool = AccountPool(await managers(tmp_path, sim, 2))
        discovery = AccountDiscovery(pool, ServiceApi(session, sim.url), fallback=builtin_catalogue())
        before = discovery.catalogue()
        assert before.ids == builtin_catalogue().ids
        await discovery.refresh_catalogues()
        after = discovery.catalogue()
        assert "claude-opus-4.6" in after.ids and set(builtin_catalogue().ids) <= set(after.ids)
        assert discovery.catalogue() is after  # asked once per request: not merged again

        sim.services.catalogue_by_account = {"rt0": [catalogue_entry("claude-haiku-4.5")]}
        sim.services.catalogue = [catalogue_entry("claude-haiku-4.5")]
        await discovery.refresh_catalogues()
        assert discovery.catalogue().ids == ("claude-haiku-4.5",)


async def test_exhausted_credits_rest_the_account_until_they_reset(tmp_path):
    resets_at = time.time() + 3 * 24 * 3600
    async with SimulatedUpstream() as sim, create_session() as session:
        sim.services.usage_by_account = {"rt0": usage_document(100, 100, resets_at=resets_at)}
        pool = AccountPool(await managers(tmp_path, sim, 2))
        reported = []
        observer = UpstreamObserver(account_credits=lambda *credits: reported.append(credits))
        discovery = AccountDiscovery(
            pool, ServiceApi(session, sim.url), fallback=builtin_catalogue(), observer=observer
        )
        with capture_logs() as logs:
            await discovery.refresh_all_credits()
    health = {view.account_id: view for view in pool.health()}
    assert health["acc0"].health == "quota_exhausted"
    assert abs(health["acc0"].resting_for - (resets_at - time.time())) < 60
    assert health["acc1"].health == "ready"
    assert [pool.pick().account_id for _ in range(3)] == ["acc1"] * 3
    assert any("credits are used up" in line.message for line in logs.lines if line.level == "WARNING")
    # The metrics hear of every read.
    assert sorted(reported) == [("acc0", "acc0", 100.0, 100.0), ("acc1", "acc1", 12.5, 50.0)]


async def test_usage_is_cached_for_its_max_age_and_read_again_after_a_served_request(tmp_path):
    now = [1000.0]
    async with SimulatedUpstream() as sim, create_session() as session:
        pool = AccountPool(await managers(tmp_path, sim, 1))
        discovery = AccountDiscovery(
            pool, ServiceApi(session, sim.url), fallback=builtin_catalogue(), credits_max_age=60, clock=lambda: now[0]
        )

        def usage_reads() -> int:
            return sum(operation == "getUsageLimits" for _flavour, operation, _params in sim.services.requests)

        assert await discovery.account_usage("acc0") == {
            "subscription": "KIRO FREE",
            "used": 12.5,
            "limit": 50,
            "resets_at": discovery.credits("acc0").as_dict()["resets_at"],
        }
        await discovery.account_usage("acc0")
        pool.report_success("acc0")  # fresh enough: no read
        await asyncio.sleep(0.05)
        assert usage_reads() == 1

        now[0] += 61
        sim.services.usage = usage_document(20, 50)
        pool.report_success("acc0")  # stale now: read again in the background
        assert await sim.wait_until(lambda: usage_reads() == 2)
        await asyncio.sleep(0.05)
        assert discovery.credits("acc0").used == 20
        with pytest.raises(KeyError):
            await discovery.account_usage("nobody")
        await discovery.stop()


async def test_on_demand_catalogue_reads_happen_at_most_once_per_interval_from_any_thread(tmp_path):
    now = [1000.0]
    async with SimulatedUpstream() as sim, create_session() as session:
        pool = AccountPool(await managers(tmp_path, sim, 1))
        discovery = AccountDiscovery(
            pool, ServiceApi(session, sim.url), fallback=builtin_catalogue(), clock=lambda: now[0]
        )

        def catalogue_reads() -> int:
            return sum(operation == "ListAvailableModels" for _flavour, operation, _params in sim.services.requests)

        discovery.request_refresh()
        assert await sim.wait_until(lambda: catalogue_reads() >= 1)
        discovery.request_refresh()
        now[0] += ON_DEMAND_MIN_INTERVAL - 1
        discovery.request_refresh()
        await asyncio.sleep(0.1)
        first = catalogue_reads()
        now[0] += 2
        discovery.request_refresh()
        assert await sim.wait_until(lambda: catalogue_reads() > first)
        # From a worker thread (large requests are prepared there), the read still runs on the loop.
        second = catalogue_reads()
        now[0] += ON_DEMAND_MIN_INTERVAL
        await asyncio.to_thread(discovery.request_refresh)
        assert await sim.wait_until(lambda: catalogue_reads() > second)
        await discovery.stop()


async def test_the_pool_routes_by_catalogue(tmp_path):
    store = SqliteAccountStore(tmp_path)
    pool = AccountPool(
        [
            TokenManager(
                await store.add(auth_method="social", refresh_token=f"r{i}", account_id=f"a{i}"), store, _no_refresh
            )
            for i in range(2)
        ]
    )
    assert pool.pick(model="anything").account_id == "a0"  # catalogues unknown: any account may try
    pool.set_models("a0", ["Claude-Opus-4.6"])
    pool.set_models("a1", ["amazon-nova-lite"])
    assert {pool.pick(model="claude-opus-4.6").account_id for _ in range(3)} == {"a0"}
    assert pool.pick(model="gpt-4o") is None
    assert pool.has_alternative(exclude={"a0"}, model="amazon-nova-lite")
    assert not pool.has_alternative(exclude={"a0"}, model="claude-opus-4.6")
