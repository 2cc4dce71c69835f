"""`q2api accounts add | enable | disable` and `q2api login` against the simulated token services,
and a served gateway that follows the store without a restart."""

from __future__ import annotations

import urllib.error
from pathlib import Path

from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.cli import run
from tests.support.serve_process import ServeProcess, serve
from tests.support.stores import sqlite_store

REFRESH_SECRET = "rt-NEVER-PRINT-7f3a9c1e5b"


def status_of(server: ServeProcess, path: str) -> int:
    try:
        return server.get_bytes(path)[0]
    except urllib.error.HTTPError as refused:
        return refused.code


def test_accounts_add_refuses_a_token_the_token_service_refuses(data_dir, capsys, monkeypatch, token_service):
    token_service.valid_refresh_tokens = {"the-only-good-token"}
    monkeypatch.setenv("Q2API_NEW_REFRESH_TOKEN", REFRESH_SECRET)
    code, out, err = run(capsys, "accounts", "add", "--label", "made-up")
    assert code == 1
    assert "refused this refresh token" in err and "nothing was stored" in err
    assert sqlite_store(data_dir).accounts() == []
    assert REFRESH_SECRET not in out + err
    assert token_service.refresh_requests[-1].body == {"refreshToken": REFRESH_SECRET}  # a real refresh was tried


def test_accounts_add_no_verify_stores_without_asking_the_token_service(data_dir, capsys, monkeypatch, token_service):
    monkeypatch.setenv("Q2API_NEW_REFRESH_TOKEN", REFRESH_SECRET)
    code, out, err = run(capsys, "accounts", "add", "--label", "unchecked", "--no-verify")
    assert code == 0, err
    assert "Not checked" in out
    assert token_service.refresh_calls == 0
    [stored] = sqlite_store(data_dir).accounts()
    assert stored.refresh_token == REFRESH_SECRET and stored.access_token is None


def test_accounts_add_stores_the_verified_access_token(data_dir, capsys, monkeypatch, token_service):
    monkeypatch.setenv("Q2API_NEW_REFRESH_TOKEN", REFRESH_SECRET)
    code, _, err = run(capsys, "accounts", "add", "--label", "checked")
    assert code == 0, err
    [stored] = sqlite_store(data_dir).accounts()
    assert stored.access_token in token_service.valid_access_tokens and stored.expires_at is not None


def test_every_accounts_command_names_its_store(data_dir, capsys):
    for argv in (("list",), ("remove", "nobody"), ("enable", "nobody")):
        _, _, err = run(capsys, "accounts", *argv)
        assert f"store: {(data_dir / 'q2api.sqlite3').resolve()}" in err.splitlines()


def test_accounts_disable_and_enable(data_dir, capsys):
    store = sqlite_store(data_dir)
    account = store.add(auth_method="social", refresh_token="t1", label="work")
    code, out, _ = run(capsys, "accounts", "disable", "work")
    assert code == 0 and f"Disabled account {account.id}" in out
    assert store.get(account.id).enabled is False
    _, listing, _ = run(capsys, "accounts", "list")
    assert listing.splitlines()[1].split()[:4] == [account.id, "work", "social", "disabled"]
    code, _, _ = run(capsys, "accounts", "enable", account.id)
    assert code == 0 and store.get(account.id).enabled is True
    code, _, err = run(capsys, "accounts", "disable", "nobody")
    assert code == 1 and "no account with id or label 'nobody'" in err


def test_login_prints_the_code_waits_and_stores_the_account(data_dir, capsys, token_service):
    token_service.device.interval = 0.01
    code, out, err = run(capsys, "login", "--label", "me")
    assert code == 0, err
    assert "SIMU-" in out and f"{token_service.base_url}/device?user_code=SIMU-" in out
    [stored] = sqlite_store(data_dir).accounts()
    assert (stored.label, stored.auth_method, stored.region) == ("me", "idc", "us-east-1")
    assert stored.refresh_token in token_service.device.issued_refresh_tokens
    assert stored.client_id in token_service.device.clients
    for secret in (stored.refresh_token, stored.client_secret, stored.access_token):
        assert secret not in out + err


def test_login_denied_stores_nothing(data_dir, capsys, token_service):
    token_service.device.interval = 0.01
    token_service.device.answers.clear()
    token_service.device.answers.append("access_denied")
    code, _, err = run(capsys, "login")
    assert code == 1 and "denied" in err
    assert sqlite_store(data_dir).accounts() == []


def test_login_without_a_label_never_replaces_an_account(data_dir, capsys, token_service):
    token_service.device.interval = 0.01
    sqlite_store(data_dir).add(auth_method="social", refresh_token="t", label="builder-id")
    code, _out, err = run(capsys, "login")
    assert code == 0, err
    assert sorted(account.label for account in sqlite_store(data_dir).accounts()) == [
        "builder-id",
        "builder-id-2",
    ]


def test_login_idc_needs_a_start_url(data_dir, capsys):
    code, _, err = run(capsys, "login", "--method", "idc")
    assert code == 2 and "start URL" in err


def test_served_workers_name_their_store_and_follow_a_disabled_account(tmp_path: Path) -> None:
    with SimulatedUpstream.run_in_thread() as upstream, serve(tmp_path, upstream.env(), workers=2) as server:
        # Where am I: each worker names its store and the accounts in it.
        store_path = (tmp_path / "data" / "q2api.sqlite3").resolve()
        assert sum(f"account store: {store_path} (1 account(s))" in line for line in server.lines) == 2
        assert any("account env (environment, idc): active" in line for line in server.lines)
        assert status_of(server, "/readyz") == 200

        # Hot reload: an account switched off in the store leaves both workers within seconds.
        sqlite_store(tmp_path / "data").update("env", enabled=False)
        server.wait_until(lambda: all(status_of(server, "/readyz") == 503 for _ in range(8)))


API_KEY_SECRET = "ksk_cli-NEVER-PRINT-9b8a7c6d"


def test_accounts_add_takes_a_kiro_api_key_checked_by_one_call(data_dir, capsys, monkeypatch, token_service):
    token_service.check_tokens = True  # the key is taken only with its tokentype
    token_service.add_api_key(API_KEY_SECRET)
    monkeypatch.setenv("Q2API_NEW_API_KEY", API_KEY_SECRET)
    code, out, err = run(capsys, "accounts", "add", "--label", "ci", "--region", "eu-central-1")
    assert code == 0, err
    assert "Added account" in out and "api_key" in out
    [stored] = sqlite_store(data_dir).accounts()
    assert (stored.auth_method, stored.access_token, stored.refresh_token) == ("api_key", API_KEY_SECRET, None)
    assert stored.region == "eu-central-1"
    assert token_service.refresh_calls == 0
    assert [op for _, op, _ in token_service.services.requests] == ["getUsageLimits"]
    assert API_KEY_SECRET not in out + err
    code, out, _ = run(capsys, "accounts", "list")  # its credits, read with the key
    assert code == 0 and "12.5/50" in out


def test_accounts_list_shows_a_key_account_its_region_and_its_proxy_masked(data_dir, capsys, monkeypatch):
    monkeypatch.setenv("Q2API_NEW_API_KEY", API_KEY_SECRET)
    proxy = "socks5://u:pw-NEVER@127.0.0.1:9"  # nothing listens there: the listing's credit read just fails
    code, _, err = run(
        capsys, "accounts", "add", "--label", "ci", "--region", "eu-central-1", "--proxy", proxy, "--no-verify"
    )
    assert code == 0, err
    [stored] = sqlite_store(data_dir).accounts()
    assert stored.proxy_url == proxy
    code, out, err = run(capsys, "accounts", "list")
    assert code == 0
    [row] = [line for line in out.splitlines() if line.startswith(stored.id)]
    assert "api_key" in row and "never (API key)" in row and "eu-central-1" in row
    assert "socks5://u:…@127.0.0.1:9" in row
    assert API_KEY_SECRET not in out + err and "NEVER" not in out + err


def test_accounts_add_refuses_a_key_amazon_q_refuses(data_dir, capsys, monkeypatch, token_service):
    token_service.check_tokens = True
    monkeypatch.setenv("Q2API_NEW_API_KEY", API_KEY_SECRET)  # never added to the simulator
    code, out, err = run(capsys, "accounts", "add", "--label", "ci")
    assert code == 1
    assert "Amazon Q refused this API key" in err and "nothing was stored" in err
    assert sqlite_store(data_dir).accounts() == []
    assert API_KEY_SECRET not in out + err


def test_accounts_add_refuses_a_key_beside_login_options_and_a_bad_proxy_or_region(data_dir, capsys, monkeypatch):
    monkeypatch.setenv("Q2API_NEW_API_KEY", API_KEY_SECRET)
    code, _, err = run(capsys, "accounts", "add", "--label", "ci", "--client-id", "cid")
    assert code == 2 and "Q2API_NEW_API_KEY" in err
    code, _, err = run(capsys, "accounts", "add", "--label", "ci", "--proxy", "ftp://u:pw-NEVER@h:21")
    assert code == 2 and "proxy" in err and "NEVER" not in err
    code, _, err = run(capsys, "accounts", "add", "--label", "ci", "--region", "moon-1")
    assert code == 2 and "--region" in err
    assert sqlite_store(data_dir).accounts() == []


def test_an_idc_login_added_by_the_cli_gets_its_profile(data_dir, capsys, monkeypatch, token_service):
    token_service.services.profiles = [{"arn": "arn:aws:codewhisperer:us-east-1:1:profile/CLI", "profileName": "p"}]
    monkeypatch.setenv("Q2API_NEW_REFRESH_TOKEN", REFRESH_SECRET)
    monkeypatch.setenv("Q2API_NEW_CLIENT_SECRET", "client-secret-NEVER")
    code, out, err = run(capsys, "accounts", "add", "--label", "corp", "--client-id", "cid")
    assert code == 0, err
    assert "Amazon Q profile: arn:aws:codewhisperer:us-east-1:1:profile/CLI" in out
    [stored] = sqlite_store(data_dir).accounts()
    assert stored.profile_arn == "arn:aws:codewhisperer:us-east-1:1:profile/CLI"
