"""Settings from the environment over a `.env` file over the table's defaults."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

from q2api.settings.parsers import SettingsError
from q2api.settings.table import VARIABLES, Settings
from q2api.store.database_url import mask_database_url
from q2api.store.secret_box import GENERATE_KEY_HINT


def merged_environment(env: Mapping[str, str] | None, env_file: str | Path | None) -> dict[str, str]:
    """`env` (default: `os.environ`) over `env_file` (skipped if absent or None)."""
    merged: dict[str, str] = {}
    if env_file is not None and Path(env_file).is_file():
        merged.update({key: value for key, value in dotenv_values(env_file).items() if value is not None})
    merged.update(os.environ if env is None else env)
    return merged


def load_settings(env: Mapping[str, str] | None = None, env_file: str | Path | None = ".env") -> Settings:
    """Build the settings from `env` (default: `os.environ`) over `env_file` (skipped if absent or None).

    Raises :class:`SettingsError` naming the first invalid variable.
    """
    merged = merged_environment(env, env_file)
    values: dict[str, Any] = {}
    for variable in VARIABLES:
        raw = merged.get(variable.name)
        if raw is not None:
            values[variable.field] = variable.parser(variable.name, raw)
    settings = Settings(**values)
    _check_consistency(settings)
    return settings


def _check_consistency(settings: Settings) -> None:
    if (
        settings.auth_method_setting == "idc"
        and settings.refresh_token
        and not (settings.client_id and settings.client_secret)
    ):
        raise SettingsError(
            "AMAZONQ_AUTH_METHOD=idc needs AMAZONQ_CLIENT_ID and AMAZONQ_CLIENT_SECRET "
            "(the OIDC client registration used to refresh the token)"
        )
    if settings.admin_key and settings.admin_key in settings.api_keys:
        raise SettingsError("Q2API_ADMIN_KEY must differ from every key in Q2API_API_KEYS")
    if settings.database_url and not settings.secret_key:
        raise SettingsError(
            f"Q2API_DATABASE_URL names a shared store ({mask_database_url(settings.database_url)}), which keeps "
            f"refresh tokens and client secrets encrypted: set Q2API_SECRET_KEY (make one with {GENERATE_KEY_HINT})"
        )
    login_variables = (settings.refresh_token, settings.access_token, settings.client_id, settings.profile_arn)
    if settings.amazonq_api_key and any(login_variables):
        raise SettingsError(
            "AMAZONQ_API_KEY is an account of its own: unset AMAZONQ_REFRESH_TOKEN, AMAZONQ_ACCESS_TOKEN, "
            "AMAZONQ_CLIENT_ID/SECRET and AMAZONQ_PROFILE_ARN (a key sends no profile), or add the key with "
            "`q2api accounts add` instead"
        )
    if bool(settings.client_id) != bool(settings.client_secret):
        missing = "AMAZONQ_CLIENT_SECRET" if settings.client_id else "AMAZONQ_CLIENT_ID"
        raise SettingsError(f"{missing} must be set together with the other OIDC client variable")
