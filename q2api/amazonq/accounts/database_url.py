"""`Q2API_DATABASE_URL`: which shared database, through which driver, and how to name it in a log.

`postgresql://…` (or `postgres://…`) is served by psycopg 3, `mysql://…` or
`mariadb://…` by PyMySQL. The password never leaves this object unmasked
except towards the driver: `masked` is what logs, errors and the CLI show.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import sqlalchemy as sa

# SQLAlchemy is imported only when a database URL is actually used: the default SQLite store never
# needs it, and importing it costs every worker about 10 MB of RSS (bench/bench_gateway.py, idle RSS).

DatabaseKind = Literal["postgresql", "mysql"]

_DRIVERS: dict[str, tuple[DatabaseKind, str]] = {
    "postgresql": ("postgresql", "postgresql+psycopg"),
    "postgres": ("postgresql", "postgresql+psycopg"),
    "postgresql+psycopg": ("postgresql", "postgresql+psycopg"),
    "mysql": ("mysql", "mysql+pymysql"),
    "mariadb": ("mysql", "mysql+pymysql"),
    "mysql+pymysql": ("mysql", "mysql+pymysql"),
}


@dataclasses.dataclass(frozen=True, repr=False)
class DatabaseUrl:
    kind: DatabaseKind
    url: sa.URL  # with the driver SQLAlchemy needs; holds the password

    @property
    def masked(self) -> str:
        """The URL with its password replaced by `***`: safe for logs."""
        return self.url.set(drivername=self.kind).render_as_string(hide_password=True)

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
