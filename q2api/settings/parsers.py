"""How a variable's text becomes a typed value, and how a value is written back as text.

Each parser is a small object rather than a bare function so that the one
object that validates a variable also says, for the generated reference, what
it accepts (`accepts`) and how its default is written in `.env` (`write`). The
variable's name is passed in at parse time so every refusal names it.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar

from q2api.amazonq.account_proxies import check_proxy_url
from q2api.amazonq.hosts import parse_override, write_override
from q2api.store.database_url import mask_database_url, parse_database_url
from q2api.store.secret_box import SecretBox

T = TypeVar("T")
Number_ = TypeVar("Number_", int, float)
Choice_ = TypeVar("Choice_", bound=str)
E = TypeVar("E", bound=StrEnum)


class SettingsError(ValueError):
    """A configuration value is invalid; the message names the variable."""


class Parser(Protocol[T]):
    """Reads one variable's text; says what it accepts; writes a value back as `.env` text."""

    @property
    def accepts(self) -> str: ...

    def __call__(self, name: str, raw: str) -> T: ...

    def write(self, value: T) -> str: ...


@dataclasses.dataclass(frozen=True)
class Text:
    """Free text; empty means unset (None)."""

    accepts: str = "text"

    def __call__(self, name: str, raw: str) -> str | None:
        return raw.strip() or None

    def write(self, value: str | None) -> str:
        return value or ""


@dataclasses.dataclass(frozen=True)
class RedisUrl:
    """A Redis URL (`redis://`, `rediss://` with TLS, `unix://`); empty means unset (None)."""

    accepts: str = "`redis://…`, `rediss://…` or `unix://…` URL"

    def __call__(self, name: str, raw: str) -> str | None:
        value = raw.strip()
        if not value:
            return None
        if not value.startswith(("redis://", "rediss://", "unix://")):
            # It may hold a password: only its scheme is quoted back.
            raise SettingsError(
                f"{name} must be a redis://, rediss:// or unix:// URL, got {value.split(':', 1)[0]!r}:…"
            )
        return value

    def write(self, value: str | None) -> str:
        return value or ""


@dataclasses.dataclass(frozen=True)
class RedisPrefix:
    """The first part of every Redis key; braces are refused, since a Redis Cluster hashes the text
    between the first `{` and `}` of a key to find its slot, and q2api's own hash tags come after it."""

    accepts: str = "text without spaces or braces"

    def __call__(self, name: str, raw: str) -> str:
        value = raw.strip()
        if not value or any(character.isspace() or character in "{}" for character in value):
            raise SettingsError(f"{name} must be a non-empty prefix without spaces or braces, got {value!r}")
        return value

    def write(self, value: str) -> str:
        return value


def mask_redis_url(url: str) -> str:
    """The URL with its password (between `:` and `@`) replaced by `***`: safe for logs."""
    scheme, _, rest = url.partition("://")
    credentials, at, place = rest.rpartition("@")
    if not at:
        return url
    user, colon, _password = credentials.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{place}"


@dataclasses.dataclass(frozen=True)
class Url:
    accepts: str = "an http:// or https:// URL"

    def __call__(self, name: str, raw: str) -> str:
        value = raw.strip()
        if not value.startswith(("http://", "https://")):
            raise SettingsError(f"{name} must be an http:// or https:// URL, got {value!r}")
        return value

    def write(self, value: str) -> str:
        return value


@dataclasses.dataclass(frozen=True)
class ProxyUrl:
    accepts: str = "a proxy URL: http://, https://, socks4:// or socks5://, with a host and port"

    def __call__(self, name: str, raw: str) -> str | None:
        if not raw.strip():
            return None
        try:
            return check_proxy_url(raw)
        except ValueError as exc:
            raise SettingsError(f"{name}: {exc}") from None

    def write(self, value: str | None) -> str:
        return value or ""


@dataclasses.dataclass(frozen=True)
class HostOverride:
    """Empty (each account's hosts are derived), one URL, or a comma-separated ordered list of URLs, each
    optionally `kind=URL` (q2api.amazonq.hosts). Kept as written, normalised; checked here."""

    accepts: str = (
        "empty, an http(s) URL, or a comma-separated ordered list of them (`runtime=URL` names a host's kind)"
    )

    def __call__(self, name: str, raw: str) -> str:
        try:
            return write_override(parse_override(raw))
        except ValueError as exc:
            raise SettingsError(f"{name}: {exc}") from None

    def write(self, value: str) -> str:
        return value


@dataclasses.dataclass(frozen=True)
class Flag:
    accepts: str = "`true` or `false` (also 1/0, yes/no, on/off)"

    def __call__(self, name: str, raw: str) -> bool:
        value = raw.strip().lower()
        if value in {"1", "true", "yes", "on"}:
            return True
        if value in {"0", "false", "no", "off", ""}:
            return False
        raise SettingsError(f"{name} must be true or false, got {raw!r}")

    def write(self, value: bool) -> str:
        return "true" if value else "false"


@dataclasses.dataclass(frozen=True)
class Number(Generic[Number_]):
    """An integer or a number, at least (or, with `above`, greater than) `minimum`."""

    kind: type[Number_]
    minimum: Number_
    above: bool = False
    unit: str = ""  # "seconds", "bytes": said in the reference

    @property
    def accepts(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        relation = "greater than" if self.above else "at least"
        unit = f" ({self.unit})" if self.unit else ""
        return f"{what}{unit}, {relation} {self.minimum:g}"

    def __call__(self, name: str, raw: str) -> Number_:
        try:
            value = self.kind(raw.strip())
        except ValueError:
            kind_name = "an integer" if self.kind is int else "a number"
            raise SettingsError(f"{name} must be {kind_name}, got {raw!r}") from None
        if value < self.minimum or (self.above and value == self.minimum):
            relation = "greater than" if self.above else "at least"
            raise SettingsError(f"{name} must be {relation} {self.minimum}, got {raw!r}")
        return value

    def write(self, value: Number_) -> str:
        return str(value).removesuffix(".0")  # 10.0 is written 10, as an operator would


@dataclasses.dataclass(frozen=True)
class Choice(Generic[Choice_]):
    """One of a few words, matched without regard to case (stored lower-case, or upper-case with `upper`)."""

    choices: tuple[Choice_, ...]
    upper: bool = False

    @property
    def accepts(self) -> str:
        return ", ".join(f"`{choice}`" for choice in self.choices)

    def __call__(self, name: str, raw: str) -> Choice_:
        value = raw.strip().upper() if self.upper else raw.strip().lower()
        for choice in self.choices:
            if value == choice:
                return choice
        raise SettingsError(f"{name} must be one of {', '.join(self.choices)}, got {raw!r}")

    def write(self, value: Choice_) -> str:
        return value


@dataclasses.dataclass(frozen=True)
class EnumChoice(Generic[E]):
    """One of a string enum's values: the setting holds the enum the code uses, not a copy of its values."""

    kind: type[E]

    @property
    def accepts(self) -> str:
        return ", ".join(f"`{member.value}`" for member in self.kind)

    def __call__(self, name: str, raw: str) -> E:
        return self.kind(Choice(tuple(member.value for member in self.kind))(name, raw))

    def write(self, value: E) -> str:
        return value.value


def _items(raw: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in raw.split(",") if item.strip())


@dataclasses.dataclass(frozen=True)
class CommaList:
    accepts: str = "comma-separated list"

    def __call__(self, name: str, raw: str) -> tuple[str, ...]:
        return _items(raw)

    def write(self, value: tuple[str, ...]) -> str:
        return ",".join(value)


# A DNS name or an IPv4 address, `*.` before it for every name below it (underscores too: container and
# compose service names may have them).
_HOST_NAME = re.compile(r"^(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$")


@dataclasses.dataclass(frozen=True)
class HostList:
    """Host names as a `Host` header names them, without port: `gateway.lan`, `10.0.0.5`, `[fd00::1]`,
    `*.example.com` (every name below it), or `*` (any). Lower-cased, brackets and a trailing dot dropped;
    a port or a URL given by mistake is refused."""

    accepts: str = "comma-separated host names without port (`*.example.com` for every name below it), or `*`"

    def __call__(self, name: str, raw: str) -> tuple[str, ...]:
        hosts = []
        for item in _items(raw):
            host = item.lower().rstrip(".").removeprefix("[").removesuffix("]")
            if host == "*" or _HOST_NAME.match(host) or _is_ipv6(host):
                hosts.append(host)
                continue
            hint = ": list names without a port" if ":" in host and "/" not in host else ""
            raise SettingsError(f"{name} entries must be host names like gateway.lan or *, got {item!r}{hint}")
        return tuple(hosts)

    def write(self, value: tuple[str, ...]) -> str:
        return ",".join(value)


def _is_ipv6(value: str) -> bool:
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class ModelMap:
    accepts: str = "comma-separated `claude-name=amazon-q-model-id` pairs"

    def __call__(self, name: str, raw: str) -> Mapping[str, str]:
        pairs: dict[str, str] = {}
        for item in _items(raw):
            claude_name, sep, q_model_id = item.partition("=")
            if not sep or not claude_name.strip() or not q_model_id.strip():
                raise SettingsError(f"{name} entries must look like claude-name=q-model-id, got {item!r}")
            pairs[claude_name.strip()] = q_model_id.strip()
        return MappingProxyType(pairs)

    def write(self, value: Mapping[str, str]) -> str:
        return ",".join(f"{claude_name}={q_model_id}" for claude_name, q_model_id in value.items())


@dataclasses.dataclass(frozen=True)
class DatabaseUrl:
    accepts: str = "`postgresql://…`, `mysql://…` or `mariadb://…` URL"

    def __call__(self, name: str, raw: str) -> str | None:
        if not raw.strip():
            return None
        try:
            parse_database_url(raw)
        except ValueError as exc:
            # The URL may hold a password: only its masked form goes into the message.
            raise SettingsError(f"{name} {exc} (got {mask_database_url(raw)!r})") from None
        return raw.strip()

    def write(self, value: str | None) -> str:
        return value or ""


@dataclasses.dataclass(frozen=True)
class FernetKeys:
    accepts: str = "Fernet key(s), comma-separated"

    def __call__(self, name: str, raw: str) -> str | None:
        if not raw.strip():
            return None
        try:
            SecretBox(raw)
        except ValueError as exc:
            raise SettingsError(str(exc)) from None  # SecretBox's message names the variable
        return raw.strip()

    def write(self, value: str | None) -> str:
        return value or ""


@dataclasses.dataclass(frozen=True)
class Directory:
    accepts: str = "a directory path (`~` expanded)"

    def __call__(self, name: str, raw: str) -> Path:
        if not raw.strip():
            raise SettingsError(f"{name} must not be empty")
        return Path(raw.strip()).expanduser()

    def write(self, value: Path) -> str:
        # Path("./data") is Path("data"): written back with the "./" that says "relative to here".
        return str(value) if value.is_absolute() else f"./{value}"


@dataclasses.dataclass(frozen=True)
class OptionalDirectory:
    """A directory path, or empty for the default the setting describes (None)."""

    accepts: str = "empty, or a directory path (`~` expanded)"

    def __call__(self, name: str, raw: str) -> Path | None:
        return Path(raw.strip()).expanduser() if raw.strip() else None

    def write(self, value: Path | None) -> str:
        return "" if value is None else Directory().write(value)
