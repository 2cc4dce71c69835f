"""`q2api accounts import` against Kiro IDE cache directories and kiro-cli / Amazon Q CLI databases made here."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anthropic
import pytest

from q2api.accounts.records import AccountStatus
from q2api.settings import load_settings
from q2api.testing.gateway_server import running_gateway
from q2api.testing.simulated_upstream import SIM_CLIENT_ID, SIM_CLIENT_SECRET, SimulatedUpstream
from tests.support import credential_files as files
from tests.support.cli import run
from tests.support.stores import sqlite_store

PAST = "2020-01-01T00:00:00Z"


def assert_no_secret(*outputs: str) -> None:
    for output in outputs:
        for secret in files.SECRETS:
            assert secret not in output


def by_label(data_dir: Path) -> dict:
    return {account.label: account for account in sqlite_store(data_dir).accounts()}


def test_a_kiro_ide_social_login_is_stored_with_its_tokens_and_profile(data_dir, tmp_path, capsys):
    cache = files.kiro_ide_social(tmp_path / "cache")
    code, out, err = run(capsys, "accounts", "import", "--kiro-ide", str(cache))
    assert code == 0, err
    account = by_label(data_dir)["kiro-ide"]
    assert (account.auth_method, account.refresh_token) == ("social", files.IDE_SOCIAL_REFRESH)
    assert (account.access_token, account.profile_arn) == (files.IDE_ACCESS, files.SOCIAL_PROFILE_ARN)
    assert account.expires_at is not None and account.status is AccountStatus.ACTIVE
    assert f"Imported account {account.id} (kiro-ide, social, Github) from {cache / 'kiro-auth-token.json'}" in out
    assert f"Store: {(data_dir / 'q2api.sqlite3').resolve()}" in out
    assert_no_secret(out, err)


def test_a_kiro_ide_idc_login_brings_its_client_registration_and_its_region(data_dir, tmp_path, capsys):
    cache = files.kiro_ide_idc(tmp_path / "cache", region="eu-central-1")
    code, out, err = run(capsys, "accounts", "import", "--kiro-ide", str(cache), "--label", "work")
    assert code == 0, err
    account = by_label(data_dir)["work"]
    assert (account.auth_method, account.refresh_token) == ("idc", files.IDE_IDC_REFRESH)
    assert (account.client_id, account.client_secret) == (files.IDE_CLIENT_ID, files.IDE_CLIENT_SECRET)
    assert account.region == "eu-central-1" and "region eu-central-1" in out  # it refreshes in its own region
    assert_no_secret(out, err)


def test_a_kiro_cli_database_with_a_social_and_an_idc_login_gives_two_accounts(data_dir, tmp_path, capsys):
    database = files.cli_database(
        tmp_path / "data.sqlite3", {**files.kiro_cli_social_entries(), **files.kiro_cli_idc_entries()}
    )
    code, out, err = run(capsys, "accounts", "import", "--kiro-cli", str(database), "--label", "me")
    assert code == 0, err
    accounts = by_label(data_dir)
    assert set(accounts) == {"me-kiro-cli-social", "me-kiro-cli-idc"}
    assert accounts["me-kiro-cli-social"].refresh_token == files.CLI_SOCIAL_REFRESH
    idc = accounts["me-kiro-cli-idc"]
    assert (idc.refresh_token, idc.client_id, idc.client_secret) == (
        files.CLI_IDC_REFRESH,
        files.CLI_CLIENT_ID,
        files.CLI_CLIENT_SECRET,
    )
    assert_no_secret(out, err)


def test_without_options_it_looks_where_the_tools_keep_their_logins(data_dir, tmp_path, capsys, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    files.kiro_ide_social(home / ".aws" / "sso" / "cache")
    files.cli_database(home / ".local/share/kiro-cli/data.sqlite3", files.kiro_cli_idc_entries())
    files.cli_database(home / ".local/share/amazon-q/data.sqlite3", files.amazon_q_cli_entries())

    code, out, err = run(capsys, "accounts", "import")
    assert code == 0, err
    accounts = by_label(data_dir)
    assert {label: account.auth_method for label, account in accounts.items()} == {
        "kiro-ide": "social",
        "kiro-cli": "idc",
        "amazon-q-cli": "idc",
    }
    assert accounts["amazon-q-cli"].refresh_token == files.Q_CLI_REFRESH
    assert_no_secret(out, err)


def test_importing_again_after_a_new_sign_in_updates_the_same_account(data_dir, tmp_path, capsys):
    cache = tmp_path / "cache"
    files.kiro_ide_social(cache)
    assert run(capsys, "accounts", "import", "--kiro-ide", str(cache))[0] == 0
    (first,) = sqlite_store(data_dir).accounts()
    sqlite_store(data_dir).set_status(first.id, AccountStatus.NEEDS_LOGIN, "refresh token rejected")

    files.kiro_ide_social(cache, refresh_token="aorAAAAAG-after-new-sign-in")
    code, out, err = run(capsys, "accounts", "import", "--kiro-ide", str(cache))
    assert code == 0, err
    (again,) = sqlite_store(data_dir).accounts()
    assert again.id == first.id and again.refresh_token == "aorAAAAAG-after-new-sign-in"
    assert again.status is AccountStatus.ACTIVE
    assert f"Updated account {first.id} (kiro-ide" in out


def test_a_login_whose_client_registration_expired_is_skipped(data_dir, tmp_path, capsys):
    cache = files.kiro_ide_idc(tmp_path / "cache", registration_expires=PAST)
    code, out, err = run(capsys, "accounts", "import", "--kiro-ide", str(cache))
    assert code == 1
    assert "client registration expired on 2020-01-01" in err and "sign in to kiro-ide again" in err
    assert not (data_dir / "q2api.sqlite3").exists() or not sqlite_store(data_dir).accounts()
    assert_no_secret(out, err)


def test_problems_are_reported_per_source_and_the_good_ones_still_imported(data_dir, tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "kiro-auth-token.json").write_text('{"accessToken": "x"}')
    empty = files.cli_database(tmp_path / "empty.sqlite3", {})
    good = files.cli_database(tmp_path / "good.sqlite3", files.kiro_cli_social_entries())

    code, _, err = run(capsys, "accounts", "import", "--kiro-ide", str(broken), "--kiro-cli", str(empty))
    assert code == 1
    assert "kiro-auth-token.json: refreshToken is missing or empty" in err
    assert f"{empty}: holds no login" in err
    code, out, err = run(capsys, "accounts", "import", "--kiro-cli", str(good))
    assert code == 0 and "kiro-cli, social, Google" in out


def test_nothing_to_import_says_where_it_looked(data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "nobody"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "nobody" / "share"))
    code, out, _ = run(capsys, "accounts", "import")
    assert code == 1
    assert "Nothing to import" in out and str(tmp_path / "nobody" / ".aws/sso/cache/kiro-auth-token.json") in out


@pytest.mark.parametrize("source", ["kiro-ide social", "kiro-cli idc"])
async def test_an_imported_login_serves_through_the_gateway(data_dir, tmp_path, capsys, source):
    async with SimulatedUpstream(check_tokens=True) as sim:
        if source == "kiro-ide social":
            imported_refresh = "aorAAAAAG-imported-social"
            cache = files.kiro_ide_social(tmp_path / "cache", refresh_token=imported_refresh, expiresAt=PAST)
            argv = ["--kiro-ide", str(cache)]
        else:
            imported_refresh = "aorAAAAAG-imported-idc"
            entries = files.kiro_cli_idc_entries(
                refresh_token=imported_refresh, client_id=SIM_CLIENT_ID, client_secret=SIM_CLIENT_SECRET
            )
            entries["kirocli:odic:token"]["expires_at"] = PAST
            argv = ["--kiro-cli", str(files.cli_database(tmp_path / "data.sqlite3", entries))]
        sim.valid_refresh_tokens = {imported_refresh}
        # In a thread: the command runs its own event loop, and this test's is already running.
        assert (await asyncio.to_thread(run, capsys, "accounts", "import", *argv))[0] == 0

        env = {key: value for key, value in sim.env().items() if key.endswith("ENDPOINT")}
        settings = load_settings({**env, "Q2API_DATA_DIR": str(data_dir)}, env_file=None)
        async with running_gateway(settings) as url:
            client = anthropic.AsyncAnthropic(base_url=url, api_key="unused", max_retries=0)
            reply = await client.messages.create(
                model="claude-sonnet-5-5", max_tokens=32, messages=[{"role": "user", "content": "imported"}]
            )
        assert "imported" in reply.content[0].text
        # The expired access token was replaced through the imported refresh token (and registration).
        (refresh,) = sim.refresh_requests
        assert refresh.body["refreshToken"] == imported_refresh
