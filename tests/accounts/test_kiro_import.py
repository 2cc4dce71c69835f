"""Parsing the credential files of Kiro IDE, kiro-cli and the Amazon Q CLI (pure functions + readers)."""

from __future__ import annotations

import datetime
import json
import sqlite3
from pathlib import Path

import pytest

from q2api.accounts.kiro_import import (
    CredentialImportError,
    default_cli_databases,
    kiro_ide_registration_name,
    parse_auth_kv,
    parse_kiro_ide,
    read_auth_kv,
    read_kiro_ide,
)
from tests.support import credential_files as files

FUTURE_EPOCH = datetime.datetime(2099, 1, 1, tzinfo=datetime.UTC).timestamp()


def test_a_kiro_ide_social_login(tmp_path):
    login = read_kiro_ide(files.kiro_ide_social(tmp_path))
    assert (login.source, login.auth_method, login.provider) == ("kiro-ide", "social", "Github")
    assert login.refresh_token == files.IDE_SOCIAL_REFRESH and login.access_token == files.IDE_ACCESS
    assert login.expires_at == FUTURE_EPOCH
    assert login.profile_arn == files.SOCIAL_PROFILE_ARN
    assert login.client_id is None and login.client_secret is None


def test_a_kiro_ide_idc_login_takes_its_registration_from_the_client_id_hash_file(tmp_path):
    login = read_kiro_ide(files.kiro_ide_idc(tmp_path, region="eu-central-1"))
    assert (login.auth_method, login.region, login.provider) == ("idc", "eu-central-1", "BuilderId")
    assert (login.client_id, login.client_secret) == (files.IDE_CLIENT_ID, files.IDE_CLIENT_SECRET)
    assert login.registration_expires_at == FUTURE_EPOCH
    assert not login.registration_expired(now=FUTURE_EPOCH - 1) and login.registration_expired(now=FUTURE_EPOCH)


def test_an_idc_token_whose_registration_file_is_missing_says_which_file(tmp_path):
    files.kiro_ide_idc(tmp_path)
    (registration,) = [path for path in tmp_path.iterdir() if path.name != "kiro-auth-token.json"]
    registration.unlink()
    with pytest.raises(CredentialImportError) as refused:
        read_kiro_ide(tmp_path)
    assert str(registration) in str(refused.value) and "no such file" in str(refused.value)


@pytest.mark.parametrize(
    ("token", "registration", "says"),
    [
        (b"{not json", None, "kiro-auth-token.json: not valid JSON"),
        (b"[]", None, "expected a JSON object"),
        (json.dumps({"accessToken": files.IDE_ACCESS}).encode(), None, "refreshToken is missing or empty"),
        (json.dumps({"refreshToken": 42}).encode(), None, "refreshToken must be a string"),
        (json.dumps({"refreshToken": "r", "expiresAt": "soon"}).encode(), None, "expiresAt is not a time"),
        (json.dumps({"refreshToken": "r", "authMethod": "IdC"}).encode(), None, "needs its client registration"),
        (json.dumps({"refreshToken": "r"}).encode(), b'{"clientId": "c"}', "clientSecret is missing or empty"),
    ],
)
def test_a_malformed_kiro_ide_file_is_refused_naming_the_field_never_a_value(token, registration, says):
    with pytest.raises(CredentialImportError) as refused:
        parse_kiro_ide(token, registration, origin="/c/kiro-auth-token.json", registration_origin="/c/x.json")
    assert says in str(refused.value)
    assert files.IDE_ACCESS not in str(refused.value)


def test_a_client_id_hash_that_escapes_the_directory_is_refused():
    with pytest.raises(CredentialImportError, match="clientIdHash is not a plain file name"):
        kiro_ide_registration_name(b'{"clientIdHash": "../../etc/passwd"}', "token.json")
    assert kiro_ide_registration_name(b'{"clientIdHash": "abc"}', "token.json") == "abc.json"


def test_kiro_cli_social_and_idc_logins_and_the_amazon_q_cli_login(tmp_path):
    entries = {**files.kiro_cli_social_entries(), **files.kiro_cli_idc_entries(), **files.amazon_q_cli_entries()}
    database = files.cli_database(tmp_path / "data.sqlite3", entries)
    social, idc, q_cli = parse_auth_kv(read_auth_kv(database), origin=str(database))

    assert (social.source, social.auth_method, social.provider) == ("kiro-cli", "social", "Google")
    assert social.refresh_token == files.CLI_SOCIAL_REFRESH and social.profile_arn == files.SOCIAL_PROFILE_ARN
    assert social.expires_at == pytest.approx(FUTURE_EPOCH + 0.123456)
    assert (idc.source, idc.auth_method, idc.region) == ("kiro-cli", "idc", "us-east-1")
    assert (idc.refresh_token, idc.client_id, idc.client_secret) == (
        files.CLI_IDC_REFRESH,
        files.CLI_CLIENT_ID,
        files.CLI_CLIENT_SECRET,
    )
    assert idc.registration_expires_at == FUTURE_EPOCH
    assert (q_cli.source, q_cli.auth_method, q_cli.client_secret) == ("amazon-q-cli", "idc", files.Q_CLI_CLIENT_SECRET)
    assert q_cli.registration_expires_at == 4070908800
    assert "kirocli:odic:token" in idc.origin and str(database) in idc.origin


def test_an_oidc_token_without_its_device_registration_is_refused():
    entries = {"kirocli:odic:token": json.dumps(files.kiro_cli_idc_entries()["kirocli:odic:token"])}
    with pytest.raises(CredentialImportError, match="no kirocli:odic:device-registration entry"):
        parse_auth_kv(entries, origin="db")


def test_a_file_that_is_not_a_cli_database_is_refused(tmp_path):
    not_a_database = tmp_path / "data.sqlite3"
    not_a_database.write_text("hello")
    with pytest.raises(CredentialImportError, match="not a kiro-cli / Amazon Q CLI database"):
        read_auth_kv(not_a_database)
    with pytest.raises(CredentialImportError, match="no such file"):
        read_auth_kv(tmp_path / "missing.sqlite3")


def test_the_secrets_never_show_in_a_repr(tmp_path):
    login = read_kiro_ide(files.kiro_ide_idc(tmp_path))
    assert not any(secret in repr(login) for secret in files.SECRETS)


def test_default_database_locations_follow_the_platform(tmp_path):
    home = Path("/home/u")
    assert default_cli_databases(home, "linux", {}) == [
        home / ".local/share/kiro-cli/data.sqlite3",
        home / ".local/share/amazon-q/data.sqlite3",
    ]
    assert default_cli_databases(home, "linux", {"XDG_DATA_HOME": "/xdg"})[0] == Path("/xdg/kiro-cli/data.sqlite3")
    assert default_cli_databases(home, "darwin", {})[1] == home / "Library/Application Support/amazon-q/data.sqlite3"
    assert default_cli_databases(home, "win32", {"LOCALAPPDATA": "C:/L"})[0] == Path("C:/L/kiro-cli/data.sqlite3")


def test_auth_kv_values_stored_as_blobs_are_read_as_text(tmp_path):
    database = tmp_path / "data.sqlite3"
    db = sqlite3.connect(database)
    with db:
        db.execute("CREATE TABLE auth_kv (key TEXT PRIMARY KEY, value TEXT)")
        token = json.dumps(files.kiro_cli_social_entries()["kirocli:social:token"]).encode()
        db.execute("INSERT INTO auth_kv VALUES (?, ?), (?, ?)", ("kirocli:social:token", token, "other", None))
    db.close()
    (login,) = parse_auth_kv(read_auth_kv(database), origin="db")
    assert login.refresh_token == files.CLI_SOCIAL_REFRESH
