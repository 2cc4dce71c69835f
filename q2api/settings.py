"""One typed settings object, read from the environment and a `.env` file.

Only the app factory and the CLI call :func:`load_settings`; everything else
receives the values it needs as arguments. The environment wins over `.env`,
which wins over the defaults. A bad value stops start-up with a message that
names the variable, and secrets never appear in the object's repr.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TypeVar

from dotenv import dotenv_values

from q2api.accounts.database_url import mask_database_url, parse_database_url
from q2api.accounts.secret_box import GENERATE_KEY_HINT, SecretBox
from q2api.conversion.loop_guard import LoopMode

AuthMethod = Literal["idc", "social"]
LogFormat = Literal["text", "json"]
UnknownModel = Literal["family", "reject", "default"]
PromptCache = Literal["auto", "off"]

DEFAULT_ENDPOINT = "https://q.us-east-1.amazonaws.com/"
DEFAULT_OIDC_ENDPOINT = "https://oidc.us-east-1.amazonaws.com"
DEFAULT_KIRO_REFRESH_ENDPOINT = "https://prod.us-east-1.auth.desktop.kiro.dev/refreshToken"
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")

# Fields whose values are secrets: masked in repr, never logged.
SECRET_FIELDS = frozenset({"api_keys", "refresh_token", "client_secret", "access_token", "admin_key", "secret_key"})


class SettingsError(ValueError):
    """A configuration value is invalid; the message names the variable."""


def mask_secret(value: str | None) -> str:
    """Says whether a secret is set (and its length) without revealing any of it."""
    if not value:
        return "unset"
    return f"<secret, {len(value)} chars>"


@dataclasses.dataclass(frozen=True, repr=False)
class Settings:
    api_keys: tuple[str, ...] = ()
    endpoint: str = DEFAULT_ENDPOINT
    oidc_endpoint: str = DEFAULT_OIDC_ENDPOINT
    kiro_refresh_endpoint: str = DEFAULT_KIRO_REFRESH_ENDPOINT
    refresh_token: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    access_token: str | None = None
    profile_arn: str | None = None
    auth_method_setting: Literal["auto", "idc", "social"] = "auto"
    data_dir: Path = Path("data")
    debug_message_conversion: bool = False
    log_level: str = "INFO"
    log_format: LogFormat = "text"
    max_body_bytes: int = 32 * 1024 * 1024
    ping_interval: float = 10.0
    # How long a streaming reply is held back waiting for its first content, so that an upstream
    # failure arriving first is still a real HTTP status (which the SDKs retry).
    stream_hold_seconds: float = 5.0
    # How long one streaming write may wait for a client that reads nothing before the request
    # (and its upstream reply) is ended.
    send_timeout: float = 60.0
    connect_timeout: float = 10.0
    first_byte_timeout: float = 120.0
    read_timeout: float = 300.0
    max_retries: int = 3
    loop_threshold: int = 3
    loop_storm_threshold: int = 8
    loop_mode: LoopMode = LoopMode.WARN
    model_map: Mapping[str, str] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    default_model: str | None = None
    admin_key: str | None = None  # enables /admin/api; None = the admin API does not exist
    # Consecutive upstream failures after which an account rests for a while (0 = never).
    account_max_failures: int = 10
    unknown_model: UnknownModel = "family"
    # Ask Amazon Q for each account's models and credits (false: the built-in table, no credits).
    model_discovery: bool = True
    # How often each account's model catalogue is read again (0: at start-up and on demand only).
    models_refresh_seconds: float = 3600.0
    # How long an account's credits are cached (and how often they are read again; 0: start-up only).
    credits_refresh_seconds: float = 300.0
    database_url: str | None = None  # None: the SQLite store in data_dir; else a shared PostgreSQL/MySQL store
    secret_key: str | None = None  # Fernet key(s) encrypting secrets in a shared store
    # Transport limits (q2api/server/transport.py): what one client connection may cost.
    max_header_bytes: int = 64 * 1024
    max_headers: int = 100
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    keep_alive_timeout: int = 5
    max_connections: int = 400
    # `auto`: a request's cache_control breakpoints become Amazon Q cachePoints for models whose
    # catalogue says they take them (supportsPromptCache); `off`: none are sent.
    prompt_cache: PromptCache = "auto"

    @property
    def auth_method(self) -> AuthMethod:
        """`auto` resolves to IdC when the OIDC client registration is present, else Kiro social."""
        if self.auth_method_setting != "auto":
            return self.auth_method_setting
        return "idc" if self.client_id and self.client_secret else "social"

    @property
    def has_env_account(self) -> bool:
        """True when the environment configures an account (a refresh or an access token)."""
        return bool(self.refresh_token or self.access_token)

    def __repr__(self) -> str:
        parts = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "api_keys":
                shown = f"<{len(value)} keys>"
            elif field.name in SECRET_FIELDS:
                shown = mask_secret(value)
            elif field.name == "database_url":
                shown = repr(value and mask_database_url(value))
            elif field.name == "model_map":
                shown = repr(dict(value))
            else:
                shown = repr(value)
            parts.append(f"{field.name}={shown}")
        return f"Settings({', '.join(parts)})"

    __str__ = __repr__


# ---------------------------------------------------------------------------
# Parsing: each helper receives the variable name so its error can name it.

T = TypeVar("T")
E = TypeVar("E", bound=StrEnum)


def _text(name: str, raw: str) -> str | None:
    value = raw.strip()
    return value or None


def _url(name: str, raw: str) -> str:
    value = raw.strip()
    if not value.startswith(("http://", "https://")):
        raise SettingsError(f"{name} must be an http:// or https:// URL, got {value!r}")
    return value


def _bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise SettingsError(f"{name} must be true or false, got {raw!r}")


def _number(kind: Callable[[str], T], minimum: float, *, above: bool = False) -> Callable[[str, str], T]:
    def parse(name: str, raw: str) -> T:
        try:
            value = kind(raw.strip())
        except ValueError:
            kind_name = "an integer" if kind is int else "a number"
            raise SettingsError(f"{name} must be {kind_name}, got {raw!r}") from None
        if value < minimum or (above and value == minimum):  # type: ignore[operator]
            relation = "greater than" if above else "at least"
            raise SettingsError(f"{name} must be {relation} {minimum}, got {raw!r}")
        return value

    return parse


def _choice(*choices: str, upper: bool = False) -> Callable[[str, str], str]:
    def parse(name: str, raw: str) -> str:
        value = raw.strip().upper() if upper else raw.strip().lower()
        if value not in choices:
            raise SettingsError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
        return value

    return parse


def _enum(kind: type[E]) -> Callable[[str, str], E]:
    choose = _choice(*kind)

    def parse(name: str, raw: str) -> E:
        return kind(choose(name, raw))

    return parse


def _csv(name: str, raw: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def _model_map(name: str, raw: str) -> Mapping[str, str]:
    pairs: dict[str, str] = {}
    for item in _csv(name, raw):
        claude_name, sep, q_model_id = item.partition("=")
        if not sep or not claude_name.strip() or not q_model_id.strip():
            raise SettingsError(f"{name} entries must look like claude-name=q-model-id, got {item!r}")
        pairs[claude_name.strip()] = q_model_id.strip()
    return MappingProxyType(pairs)


def _database_url(name: str, raw: str) -> str | None:
    if not raw.strip():
        return None
    try:
        parse_database_url(raw)
    except ValueError as exc:
        raise SettingsError(f"{name} {exc} (got {mask_database_url(raw)!r})") from None
    return raw.strip()


def _secret_key(name: str, raw: str) -> str | None:
    if not raw.strip():
        return None
    try:
        SecretBox(raw)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    return raw.strip()


def _path(name: str, raw: str) -> Path:
    if not raw.strip():
        raise SettingsError(f"{name} must not be empty")
    return Path(raw.strip()).expanduser()


# field name -> (variable name, parser)
_VARIABLES: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "api_keys": ("Q2API_API_KEYS", _csv),
    "endpoint": ("AMAZONQ_ENDPOINT", _url),
    "oidc_endpoint": ("AMAZONQ_OIDC_ENDPOINT", _url),
    "kiro_refresh_endpoint": ("AMAZONQ_KIRO_REFRESH_ENDPOINT", _url),
    "refresh_token": ("AMAZONQ_REFRESH_TOKEN", _text),
    "client_id": ("AMAZONQ_CLIENT_ID", _text),
    "client_secret": ("AMAZONQ_CLIENT_SECRET", _text),
    "access_token": ("AMAZONQ_ACCESS_TOKEN", _text),
    "profile_arn": ("AMAZONQ_PROFILE_ARN", _text),
    "auth_method_setting": ("AMAZONQ_AUTH_METHOD", _choice("auto", "idc", "social")),
    "data_dir": ("Q2API_DATA_DIR", _path),
    "debug_message_conversion": ("DEBUG_MESSAGE_CONVERSION", _bool),
    "log_level": ("Q2API_LOG_LEVEL", _choice(*LOG_LEVELS, upper=True)),
    "log_format": ("Q2API_LOG_FORMAT", _choice("text", "json")),
    "max_body_bytes": ("Q2API_MAX_BODY_BYTES", _number(int, 1024)),
    "ping_interval": ("Q2API_PING_INTERVAL", _number(float, 0, above=True)),
    "stream_hold_seconds": ("Q2API_STREAM_HOLD_SECONDS", _number(float, 0)),
    "send_timeout": ("Q2API_SEND_TIMEOUT", _number(float, 0, above=True)),
    "connect_timeout": ("Q2API_CONNECT_TIMEOUT", _number(float, 0, above=True)),
    "first_byte_timeout": ("Q2API_FIRST_BYTE_TIMEOUT", _number(float, 0, above=True)),
    "read_timeout": ("Q2API_READ_TIMEOUT", _number(float, 0, above=True)),
    "max_retries": ("Q2API_MAX_RETRIES", _number(int, 0)),
    "loop_threshold": ("Q2API_LOOP_THRESHOLD", _number(int, 2)),
    "loop_storm_threshold": ("Q2API_LOOP_STORM_THRESHOLD", _number(int, 3)),
    "loop_mode": ("Q2API_LOOP_MODE", _enum(LoopMode)),
    "model_map": ("Q2API_MODEL_MAP", _model_map),
    "default_model": ("Q2API_DEFAULT_MODEL", _text),
    "admin_key": ("Q2API_ADMIN_KEY", _text),
    "account_max_failures": ("Q2API_ACCOUNT_MAX_FAILURES", _number(int, 0)),
    "unknown_model": ("Q2API_UNKNOWN_MODEL", _choice("family", "reject", "default")),
    "model_discovery": ("Q2API_MODEL_DISCOVERY", _bool),
    "models_refresh_seconds": ("Q2API_MODELS_REFRESH_SECONDS", _number(float, 0)),
    "credits_refresh_seconds": ("Q2API_CREDITS_REFRESH_SECONDS", _number(float, 0)),
    "database_url": ("Q2API_DATABASE_URL", _database_url),
    "secret_key": ("Q2API_SECRET_KEY", _secret_key),
    "max_header_bytes": ("Q2API_MAX_HEADER_BYTES", _number(int, 1024)),
    "max_headers": ("Q2API_MAX_HEADERS", _number(int, 8)),
    "header_timeout": ("Q2API_HEADER_TIMEOUT", _number(float, 0, above=True)),
    "body_timeout": ("Q2API_BODY_TIMEOUT", _number(float, 0, above=True)),
    "keep_alive_timeout": ("Q2API_KEEP_ALIVE_TIMEOUT", _number(int, 1)),
    "max_connections": ("Q2API_MAX_CONNECTIONS", _number(int, 1)),
    "prompt_cache": ("Q2API_PROMPT_CACHE", _choice("auto", "off")),
}

ENV_VARIABLES: tuple[str, ...] = tuple(variable for variable, _ in _VARIABLES.values())


def load_settings(env: Mapping[str, str] | None = None, env_file: str | Path | None = ".env") -> Settings:
    """Build the settings from `env` (default: `os.environ`) over `env_file` (skipped if absent or None).

    Raises :class:`SettingsError` naming the first invalid variable.
    """
    merged: dict[str, str] = {}
    if env_file is not None and Path(env_file).is_file():
        merged.update({key: value for key, value in dotenv_values(env_file).items() if value is not None})
    merged.update(os.environ if env is None else env)

    values: dict[str, Any] = {}
    for field_name, (variable, parse) in _VARIABLES.items():
        raw = merged.get(variable)
        if raw is None:
            continue
        values[field_name] = parse(variable, raw)
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
    if bool(settings.client_id) != bool(settings.client_secret):
        missing = "AMAZONQ_CLIENT_SECRET" if settings.client_id else "AMAZONQ_CLIENT_ID"
        raise SettingsError(f"{missing} must be set together with the other OIDC client variable")
