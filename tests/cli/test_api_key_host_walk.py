"""`q2api accounts add` with a Kiro API key walks the hosts an API-key account's requests walk (issue 31
item 3): a host that answers 404 or 403 is that host's answer, the next host is asked, and the key is
refused only when no host takes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from q2api.testing.simulated_hosts import HostRules
from q2api.testing.simulation_thread import SimulationThread
from tests.support.cli import run
from tests.support.stores import sqlite_store

KEY = "ksk_cli-walk-NEVER-PRINT-4c3b2a19"


@pytest.fixture
def walked_hosts(
    token_service_thread: SimulationThread, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> list[HostRules]:
    """Three hosts before `accounts add` checks a key: one answering 404, one refusing keys with 403, one taking them."""
    sim = token_service_thread.sim
    rules = (HostRules.not_found(), HostRules.refusing("api_key"), HostRules.legacy_q())
    hosts = [token_service_thread.run(sim.add_host(one)) for one in rules]
    monkeypatch.setenv("AMAZONQ_ENDPOINT", ",".join(host.override_entry for host in hosts))
    return hosts


def test_accounts_add_checks_a_key_on_the_next_hosts_after_a_404_and_a_403(
    data_dir, capsys, monkeypatch, token_service, walked_hosts
):
    token_service.check_tokens = True
    token_service.add_api_key(KEY)
    monkeypatch.setenv("Q2API_NEW_API_KEY", KEY)
    code, out, err = run(capsys, "accounts", "add", "--label", "ci")
    assert code == 0, err
    assert "Added account" in out
    [stored] = sqlite_store(data_dir).accounts()
    assert (stored.auth_method, stored.access_token) == ("api_key", KEY)
    not_found, refusing, _taking = walked_hosts
    # The 404 host is asked in both wire flavours (a 404 is also how a host without the REST paths answers).
    assert not_found.refused >= 1 and refusing.refused == 1
    assert KEY not in out + err


def test_accounts_add_refuses_a_key_no_host_takes_naming_each_hosts_answer(
    data_dir, capsys, monkeypatch, token_service, walked_hosts
):
    token_service.check_tokens = True
    monkeypatch.setenv("Q2API_NEW_API_KEY", "ksk_made-up-NEVER-PRINT")
    code, out, err = run(capsys, "accounts", "add", "--label", "ci")
    assert code != 0
    assert "refused the API key on every host" in err and "HTTP 404" in err and "HTTP 403" in err
    assert sqlite_store(data_dir).accounts() == []
    assert "NEVER-PRINT" not in out + err
