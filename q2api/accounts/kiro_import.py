"""Logins that Kiro IDE, kiro-cli and the Amazon Q CLI already hold, read for `q2api accounts import`.

Two formats (docs/protocol.md#where-clients-keep-their-logins):

* **Kiro IDE**: ``~/.aws/sso/cache/kiro-auth-token.json`` (camelCase:
  ``accessToken``, ``refreshToken``, ``expiresAt``, ``authMethod`` ``social`` or
  ``IdC``, ``provider``, ``profileArn``, ``region``, and for IdC ``clientIdHash``);
  an IdC login's client registration (``clientId``, ``clientSecret``,
  ``expiresAt``) is the file ``<clientIdHash>.json`` beside it.
* **kiro-cli / Amazon Q CLI**: a SQLite file whose ``auth_kv(key, value)``
  table holds JSON under ``kirocli:social:token``, ``kirocli:odic:token`` +
  ``kirocli:odic:device-registration`` and ``codewhisperer:odic:token`` +
  ``codewhisperer:odic:device-registration`` (snake_case fields).

The parsers are pure functions over the file contents; the two readers only
open the files. Errors name the file and the field, never a value, and the
parsed :class:`ImportedLogin` masks its secrets in its repr.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import sqlite3
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

KIRO_IDE_TOKEN_FILE = "kiro-auth-token.json"
MAX_FILE_BYTES = 1024 * 1024  # a login file is a few KB
_LATEST_TIME = 253402300799.0  # 9999-12-31T23:59:59Z: later "times" (1e20) break every date conversion

# auth_kv token keys → (the registration key an OIDC login needs or None for social, where the key comes from)
AUTH_KV_TOKENS: Mapping[str, tuple[str | None, str]] = {
    "kirocli:social:token": (None, "kiro-cli"),
    "kirocli:odic:token": ("kirocli:odic:device-registration", "kiro-cli"),
    "codewhisperer:odic:token": ("codewhisperer:odic:device-registration", "amazon-q-cli"),
}
# Held by kiro-cli but refreshed against the enterprise's own IdP, which q2api does not speak.
UNSUPPORTED_AUTH_KV_TOKENS = ("kirocli:external-idp:token",)


class CredentialImportError(ValueError):
    """A credential file exists but cannot be used; the message names the file and the field."""


@dataclasses.dataclass(frozen=True, repr=False)
class ImportedLogin:
    """One login found in a credential file, ready for the account store."""

    source: str  # "kiro-ide", "kiro-cli" or "amazon-q-cli": also the default label
    origin: str  # the file (and key) it came from, for messages
    auth_method: str  # "idc" | "social"
    refresh_token: str
    access_token: str | None = None
    expires_at: float | None = None  # of the access token, epoch seconds
    client_id: str | None = None
    client_secret: str | None = None
    registration_expires_at: float | None = None
    profile_arn: str | None = None
    region: str | None = None
    provider: str | None = None  # "Google", "Github", "BuilderId", "Enterprise", … as the file says

    def registration_expired(self, now: float) -> bool:
        return self.registration_expires_at is not None and self.registration_expires_at <= now

    def __repr__(self) -> str:
        return f"ImportedLogin(source={self.source!r}, auth_method={self.auth_method!r}, origin={self.origin!r})"


# -- Kiro IDE ------------------------------------------------------------------------


def kiro_ide_registration_name(token_document: bytes, origin: str) -> str | None:
    """The registration file an IdC token points to (`<clientIdHash>.json`), None for a social login."""
    token = _json_object(token_document, origin)
    client_id_hash = _optional_text(token, "clientIdHash", origin)
    if client_id_hash is None:
        return None
    if Path(client_id_hash).name != client_id_hash or client_id_hash.startswith("."):
        raise CredentialImportError(f"{origin}: clientIdHash is not a plain file name")
    return f"{client_id_hash}.json"


def parse_kiro_ide(
    token_document: bytes, registration_document: bytes | None, *, origin: str, registration_origin: str = ""
) -> ImportedLogin:
    """A Kiro IDE login from `kiro-auth-token.json` and, for IdC, its registration file."""
    token = _json_object(token_document, origin)
    refresh_token = _required_text(token, "refreshToken", origin)
    auth_method_field = (_optional_text(token, "authMethod", origin) or "").lower()
    client_id = client_secret = None
    registration_expires_at = None
    if registration_document is not None:
        registration = _json_object(registration_document, registration_origin)
        client_id = _required_text(registration, "clientId", registration_origin)
        client_secret = _required_text(registration, "clientSecret", registration_origin)
        registration_expires_at = _timestamp(registration, "expiresAt", registration_origin)
    # The registration may also sit in the token file itself (older Kiro builds, hand-made files).
    client_id = client_id or _optional_text(token, "clientId", origin)
    client_secret = client_secret or _optional_text(token, "clientSecret", origin)
    is_idc = auth_method_field == "idc" or (client_id is not None and client_secret is not None)
    if is_idc and not (client_id and client_secret):
        raise CredentialImportError(
            f"{origin}: an IdC login needs its client registration (clientIdHash → <clientIdHash>.json "
            "with clientId and clientSecret), and none was found"
        )
    return ImportedLogin(
        source="kiro-ide",
        origin=origin,
        auth_method="idc" if is_idc else "social",
        refresh_token=refresh_token,
        access_token=_optional_text(token, "accessToken", origin),
        expires_at=_timestamp(token, "expiresAt", origin),
        client_id=client_id if is_idc else None,
        client_secret=client_secret if is_idc else None,
        registration_expires_at=registration_expires_at if is_idc else None,
        profile_arn=_optional_text(token, "profileArn", origin),
        region=_optional_text(token, "region", origin),
        provider=_optional_text(token, "provider", origin),
    )


def read_kiro_ide(directory: Path) -> ImportedLogin:
    """Read Kiro IDE's login from its cache directory (`~/.aws/sso/cache`)."""
    token_path = directory / KIRO_IDE_TOKEN_FILE
    token_document = _read(token_path)
    registration_name = kiro_ide_registration_name(token_document, str(token_path))
    registration_document = None
    registration_path = directory / registration_name if registration_name else None
    if registration_path is not None:
        registration_document = _read(registration_path)
    return parse_kiro_ide(
        token_document,
        registration_document,
        origin=str(token_path),
        registration_origin=str(registration_path or ""),
    )


# -- kiro-cli / Amazon Q CLI ----------------------------------------------------------


def parse_auth_kv(entries: Mapping[str, str], *, origin: str) -> list[ImportedLogin]:
    """Every supported login in an `auth_kv` table (key → JSON text)."""
    logins = []
    for token_key, (registration_key, source) in AUTH_KV_TOKENS.items():
        if token_key not in entries:
            continue
        where = f"{origin} [{token_key}]"
        token = _json_object(entries[token_key].encode(), where)
        client_id = client_secret = None
        registration_expires_at = None
        region = _optional_text(token, "region", where)
        if registration_key is not None:
            registration_where = f"{origin} [{registration_key}]"
            if registration_key not in entries:
                raise CredentialImportError(f"{where}: the OIDC login has no {registration_key} entry beside it")
            registration = _json_object(entries[registration_key].encode(), registration_where)
            client_id = _required_text(registration, "client_id", registration_where)
            client_secret = _required_text(registration, "client_secret", registration_where)
            registration_expires_at = _timestamp(registration, "client_secret_expires_at", registration_where)
            region = region or _optional_text(registration, "region", registration_where)
        logins.append(
            ImportedLogin(
                source=source,
                origin=where,
                auth_method="social" if registration_key is None else "idc",
                refresh_token=_required_text(token, "refresh_token", where),
                access_token=_optional_text(token, "access_token", where),
                expires_at=_timestamp(token, "expires_at", where),
                client_id=client_id,
                client_secret=client_secret,
                registration_expires_at=registration_expires_at,
                profile_arn=_optional_text(token, "profile_arn", where),
                region=region,
                provider=_optional_text(token, "provider", where),
            )
        )
    return logins


def read_auth_kv(path: Path) -> dict[str, str]:
    """The `auth_kv` table of a kiro-cli / Amazon Q CLI database, opened read-only."""
    if not path.exists():
        raise CredentialImportError(f"{path}: no such file")
    if not path.is_file():  # a FIFO or a device: SQLite would wait on it or read it forever
        raise CredentialImportError(f"{path}: not a regular file")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT key, value FROM auth_kv").fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise CredentialImportError(f"{path}: not a kiro-cli / Amazon Q CLI database ({exc})") from None
    entries = {}
    for key, stored in rows:
        # Text normally; BLOBs are decoded; NULLs and numbers are nothing these tools write: skipped.
        if isinstance(stored, bytes):
            try:
                entries[str(key)] = stored.decode()
            except UnicodeDecodeError:
                raise CredentialImportError(f"{path} [{key}]: not UTF-8 text") from None
        elif isinstance(stored, str):
            entries[str(key)] = stored
    return entries


# -- where the tools keep them ---------------------------------------------------------


def default_kiro_ide_dir(home: Path | None = None) -> Path:
    return (home or Path.home()) / ".aws" / "sso" / "cache"


def default_cli_databases(
    home: Path | None = None, platform: str = sys.platform, environ: Mapping[str, str] = os.environ
) -> list[Path]:
    """kiro-cli's and the Amazon Q CLI's `data.sqlite3`, in the platform's local data directory."""
    home = home or Path.home()
    if platform == "darwin":
        base = home / "Library" / "Application Support"
    elif platform.startswith("win"):
        base = Path(environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    else:
        base = Path(environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    return [base / "kiro-cli" / "data.sqlite3", base / "amazon-q" / "data.sqlite3"]


# -- field access --------------------------------------------------------------------


def _read(path: Path) -> bytes:
    """A regular file of at most MAX_FILE_BYTES: a FIFO, a device (`/dev/zero`) or a huge file is refused, not read
    forever. Opened without blocking (a FIFO's open would wait for a writer), then checked on the open file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise CredentialImportError(f"{path}: no such file") from None
    except OSError as exc:
        raise CredentialImportError(f"{path}: cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CredentialImportError(f"{path}: not a regular file")
        try:
            document = file.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise CredentialImportError(f"{path}: cannot be read ({exc.strerror})") from None
    if len(document) > MAX_FILE_BYTES:
        raise CredentialImportError(f"{path}: larger than {MAX_FILE_BYTES} bytes, which no login file is")
    return document


def _json_object(document: bytes, origin: str) -> dict[str, Any]:
    try:
        value = orjson.loads(document)
    except orjson.JSONDecodeError:
        raise CredentialImportError(f"{origin}: not valid JSON") from None
    if not isinstance(value, dict):
        raise CredentialImportError(f"{origin}: expected a JSON object")
    return value


def _optional_text(document: Mapping[str, Any], field: str, origin: str) -> str | None:
    value = document.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise CredentialImportError(f"{origin}: {field} must be a string")
    return value.strip() or None


def _required_text(document: Mapping[str, Any], field: str, origin: str) -> str:
    value = _optional_text(document, field, origin)
    if value is None:
        raise CredentialImportError(f"{origin}: {field} is missing or empty")
    return value


def _timestamp(document: Mapping[str, Any], field: str, origin: str) -> float | None:
    """An RFC 3339 time (`2025-10-08T17:12:56.785Z`) or epoch seconds, as epoch seconds."""
    value = document.get(field)
    if value is None or value == "":
        return None
    epoch: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        epoch = float(value)
    elif isinstance(value, str):
        try:
            moment = datetime.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=datetime.UTC)
            epoch = moment.timestamp()
    if epoch is None:
        raise CredentialImportError(f"{origin}: {field} is not a time")
    if not (0 <= epoch <= _LATEST_TIME):  # NaN fails too
        raise CredentialImportError(f"{origin}: {field} is out of range (not between 1970 and 9999)")
    return epoch
