"""Kiro IDE cache directories and kiro-cli / Amazon Q CLI databases in the formats those tools write.

Kiro IDE: `kiro-auth-token.json` (camelCase) and, for IdC logins, `<clientIdHash>.json` beside it.
kiro-cli and the Amazon Q CLI: a SQLite file with `auth_kv(key TEXT PRIMARY KEY, value TEXT)`
holding JSON (snake_case) under `kirocli:…` / `codewhisperer:…` keys.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

IDE_SOCIAL_REFRESH = "aorAAAAAG-ide-social-NEVER-PRINT-1a2b"
IDE_IDC_REFRESH = "aorAAAAAG-ide-idc-NEVER-PRINT-3c4d"
IDE_ACCESS = "aoaAAAAAG-ide-access-NEVER-PRINT-5e6f"
IDE_CLIENT_ID = "oMp7qfW2oH1OgDwZNKJHdnVzLWVhc3QtMQ"
IDE_CLIENT_SECRET = "eyJraWQiOiJrZXktMTU-ide-secret-NEVER-PRINT-7a8b"
CLI_SOCIAL_REFRESH = "aorAAAAAG-cli-social-NEVER-PRINT-9c0d"
CLI_IDC_REFRESH = "aorAAAAAG-cli-idc-NEVER-PRINT-1e2f"
CLI_CLIENT_ID = "cli-client-id-2b3c4d"
CLI_CLIENT_SECRET = "cli-client-secret-NEVER-PRINT-3a4b"
Q_CLI_REFRESH = "aorAAAAAG-qcli-NEVER-PRINT-5c6d"
Q_CLI_CLIENT_SECRET = "qcli-client-secret-NEVER-PRINT-7e8f"
SOCIAL_PROFILE_ARN = "arn:aws:codewhisperer:us-east-1:699475941385:profile/EHGA3GRVQMUK"
FUTURE = "2099-01-01T00:00:00.000Z"

SECRETS = (
    IDE_SOCIAL_REFRESH,
    IDE_IDC_REFRESH,
    IDE_ACCESS,
    IDE_CLIENT_SECRET,
    CLI_SOCIAL_REFRESH,
    CLI_IDC_REFRESH,
    CLI_CLIENT_SECRET,
    Q_CLI_REFRESH,
    Q_CLI_CLIENT_SECRET,
)


def kiro_ide_social(directory: Path, *, refresh_token: str = IDE_SOCIAL_REFRESH, **overrides: Any) -> Path:
    """A Kiro IDE cache directory after a Google / GitHub sign-in."""
    token = {
        "accessToken": IDE_ACCESS,
        "refreshToken": refresh_token,
        "profileArn": SOCIAL_PROFILE_ARN,
        "expiresAt": FUTURE,
        "authMethod": "social",
        "provider": "Github",
        **overrides,
    }
    return _write_json(directory, "kiro-auth-token.json", token)


def kiro_ide_idc(
    directory: Path, *, region: str = "us-east-1", registration_expires: str = FUTURE, **overrides: Any
) -> Path:
    """A Kiro IDE cache directory after a Builder ID / IAM Identity Center sign-in."""
    client_id_hash = hashlib.sha1(IDE_CLIENT_ID.encode()).hexdigest()  # the name only has to match
    token = {
        "accessToken": IDE_ACCESS,
        "refreshToken": IDE_IDC_REFRESH,
        "expiresAt": FUTURE,
        "clientIdHash": client_id_hash,
        "authMethod": "IdC",
        "provider": "BuilderId",
        "region": region,
        **overrides,
    }
    registration = {"clientId": IDE_CLIENT_ID, "clientSecret": IDE_CLIENT_SECRET, "expiresAt": registration_expires}
    _write_json(directory, f"{client_id_hash}.json", registration)
    return _write_json(directory, "kiro-auth-token.json", token)


def cli_database(path: Path, entries: Mapping[str, Mapping[str, Any]]) -> Path:
    """A kiro-cli / Amazon Q CLI `data.sqlite3` with these auth_kv entries (JSON values)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    with db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS migrations (id INTEGER PRIMARY KEY, version INTEGER, migration_time INTEGER)"
        )
        db.execute("CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value BLOB)")
        db.execute("CREATE TABLE IF NOT EXISTS auth_kv (key TEXT PRIMARY KEY, value TEXT)")
        db.executemany(
            "INSERT OR REPLACE INTO auth_kv (key, value) VALUES (?, ?)",
            [(key, json.dumps(value)) for key, value in entries.items()],
        )
    db.close()
    return path


def kiro_cli_social_entries(refresh_token: str = CLI_SOCIAL_REFRESH) -> dict[str, dict[str, Any]]:
    return {
        "kirocli:social:token": {
            "access_token": "aoa-cli-social-access",
            "expires_at": "2099-01-01T00:00:00.123456789Z",  # Rust `time` writes nanoseconds
            "refresh_token": refresh_token,
            "profile_arn": SOCIAL_PROFILE_ARN,
            "provider": "Google",
        }
    }


def kiro_cli_idc_entries(
    *,
    region: str = "us-east-1",
    secret_expires_at: str = FUTURE,
    refresh_token: str = CLI_IDC_REFRESH,
    client_id: str = CLI_CLIENT_ID,
    client_secret: str = CLI_CLIENT_SECRET,
) -> dict[str, dict[str, Any]]:
    return {
        "kirocli:odic:token": {
            "access_token": "aoa-cli-idc-access",
            "expires_at": "2099-01-01T00:00:00Z",
            "refresh_token": refresh_token,
            "region": region,
            "start_url": "https://view.awsapps.com/start",
            "oauth_flow": "DeviceCode",
            "scopes": ["codewhisperer:completions", "codewhisperer:analysis", "codewhisperer:conversations"],
        },
        "kirocli:odic:device-registration": {
            "client_id": client_id,
            "client_secret": client_secret,
            "client_secret_expires_at": secret_expires_at,
            "region": region,
            "oauth_flow": "DeviceCode",
            "scopes": ["codewhisperer:completions"],
        },
    }


def amazon_q_cli_entries() -> dict[str, dict[str, Any]]:
    return {
        "codewhisperer:odic:token": {
            "access_token": "aoa-qcli-access",
            "expires_at": "2099-01-01T00:00:00Z",
            "refresh_token": Q_CLI_REFRESH,
            "region": "us-east-1",
            "start_url": "https://view.awsapps.com/start",
            "oauth_flow": "DeviceCode",
            "scopes": ["codewhisperer:completions"],
        },
        "codewhisperer:odic:device-registration": {
            "client_id": "qcli-client-id",
            "client_secret": Q_CLI_CLIENT_SECRET,
            "client_secret_expires_at": 4070908800,
            "region": "us-east-1",
            "oauth_flow": "DeviceCode",
            "scopes": ["codewhisperer:completions"],
        },
    }


def _write_json(directory: Path, name: str, document: Mapping[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(json.dumps(document, indent=2))
    return directory
