"""`Q2API_DATABASE_URL`: which shared database, through which driver, and how to name it in a log.

`postgresql://…` (or `postgres://…`) is served by asyncpg, `mysql://…` or
`mariadb://…` by aiomysql, both through SQLAlchemy's asyncio extension. The
password never leaves this object unmasked except towards the driver:
`masked` is what logs, errors and the CLI show (with a password given as a query
parameter, `?password=` or `?sslpassword=`, hidden too).

The query string keeps the meaning it has for each database's own clients:
libpq's parameters for PostgreSQL (`sslmode`, `sslrootcert`, `options`,
`application_name`…), which asyncpg reads from a DSN only; PyMySQL's for MySQL
(`charset`, `ssl_ca`, `ssl_cert`, `ssl_key`, `ssl_check_hostname`…), whose TLS
files aiomysql takes as an `ssl.SSLContext` only.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import ssl

    import sqlalchemy as sa

# SQLAlchemy is imported only when a database URL is actually parsed: a `q2api` command that never
# opens a store (the demo, `--help`) does without it.

DatabaseKind = Literal["postgresql", "mysql"]

_POSTGRESQL_DRIVER = "postgresql+asyncpg"
_MYSQL_DRIVER = "mysql+aiomysql"
_DRIVERS: dict[str, tuple[DatabaseKind, str]] = {
    "postgresql": ("postgresql", _POSTGRESQL_DRIVER),
    "postgres": ("postgresql", _POSTGRESQL_DRIVER),
    "postgresql+asyncpg": ("postgresql", _POSTGRESQL_DRIVER),
    "postgresql+psycopg": ("postgresql", _POSTGRESQL_DRIVER),  # the driver of earlier releases
    "mysql": ("mysql", _MYSQL_DRIVER),
    "mariadb": ("mysql", _MYSQL_DRIVER),
    "mysql+aiomysql": ("mysql", _MYSQL_DRIVER),
    "mysql+pymysql": ("mysql", _MYSQL_DRIVER),  # the driver of earlier releases
}
# Query parameters SQLAlchemy's asyncpg dialect reads itself (the rest goes to asyncpg in a DSN).
_ASYNCPG_DIALECT_PARAMETERS = frozenset({"prepared_statement_cache_size"})
# PyMySQL-style TLS parameters (SQLAlchemy would hand them to aiomysql as a dict, which it cannot use).
_MYSQL_TLS_PARAMETERS = frozenset({"ssl_ca", "ssl_capath", "ssl_cert", "ssl_key", "ssl_cipher", "ssl_check_hostname"})
_MASK = "***"
_ENCODED_MASK = urllib.parse.quote(_MASK, safe="")
# Query parameters that carry a secret: libpq's `password` and `sslpassword` (the TLS key's
# passphrase), PyMySQL's `password`/`passwd`, and any other name that says it is one.
_SECRET_PARAMETER_WORDS = ("password", "passwd", "secret", "token")


@dataclasses.dataclass(frozen=True, repr=False)
class DatabaseUrl:
    kind: DatabaseKind
    url: sa.URL  # with the driver SQLAlchemy needs; holds the password

    @property
    def masked(self) -> str:
        """The URL with its passwords replaced by `***` (the one before `@`, and `?password=`,
        `?sslpassword=`…): safe for logs."""
        hidden = {name: _MASK for name in self.url.query if _is_secret_parameter(name)}
        shown = self.url.set(drivername=self.kind).update_query_dict(hidden).render_as_string(hide_password=True)
        return shown.replace(f"={_ENCODED_MASK}", f"={_MASK}")  # the query is %-encoded; the mask reads better as is

    def engine_arguments(self) -> tuple[sa.URL, dict[str, Any]]:
        """The URL and `connect_args` to create the engine with (may read TLS files: raises OSError)."""
        query = dict(self.url.query)
        if self.kind == "postgresql":
            libpq = {name: value for name, value in query.items() if name not in _ASYNCPG_DIALECT_PARAMETERS}
            if not libpq:
                return self.url, {}
            # Host, port, user and password still come from the URL; the DSN only adds its parameters.
            dsn = "postgresql://?" + urllib.parse.urlencode(libpq, doseq=True)
            kept = {name: value for name, value in query.items() if name in _ASYNCPG_DIALECT_PARAMETERS}
            return self.url.set(query=kept), {"dsn": dsn}
        tls = {name: query.pop(name) for name in _MYSQL_TLS_PARAMETERS & query.keys()}
        if not tls:
            return self.url, {}
        return self.url.set(query=query), {"ssl": _mysql_tls_context(tls)}

    def __repr__(self) -> str:
        return f"DatabaseUrl({self.masked!r})"


def parse_database_url(raw: str) -> DatabaseUrl:
    """Raises ValueError (naming no password) when `raw` is not a PostgreSQL or MySQL/MariaDB URL."""
    import sqlalchemy as sa
    from sqlalchemy.exc import ArgumentError

    try:
        url = sa.make_url(raw.strip())
    except ArgumentError:
        raise ValueError("must look like postgresql://user:password@host:5432/database or mysql://…") from None
    driver = _DRIVERS.get(url.drivername)
    if driver is None:
        raise ValueError(f"must start with postgresql://, mysql:// or mariadb:// (not {url.drivername}://)")
    if not url.database:
        raise ValueError("must name the database (…/database at the end)")
    kind, drivername = driver
    url = url.set(drivername=drivername)
    if kind == "mysql" and "charset" not in url.query:
        url = url.update_query_dict({"charset": "utf8mb4"})  # labels and errors may hold any character
    return DatabaseUrl(kind, url)


def mask_database_url(raw: str) -> str:
    """`raw` with its password hidden, even when it does not parse (then only the scheme is kept)."""
    try:
        return parse_database_url(raw).masked
    except ValueError:
        scheme, separator, _ = raw.partition("://")
        return f"{scheme}://***" if separator else "***"


def _is_secret_parameter(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_PARAMETER_WORDS)


def _mysql_tls_context(parameters: Mapping[str, str | tuple[str, ...]]) -> ssl.SSLContext:
    """PyMySQL's `ssl_*` URL parameters as the context aiomysql takes: the server is verified unless told not to."""
    import ssl

    def value(name: str) -> str | None:
        given = parameters.get(name)
        return given[-1] if isinstance(given, tuple) else given  # a repeated parameter: the last one counts

    context = ssl.create_default_context(cafile=value("ssl_ca"), capath=value("ssl_capath"))
    if certificate := value("ssl_cert"):
        context.load_cert_chain(certificate, value("ssl_key"))
    if cipher := value("ssl_cipher"):
        context.set_ciphers(cipher)
    if (value("ssl_check_hostname") or "true").lower() in ("false", "0", "no", "off"):
        context.check_hostname = False
    return context
