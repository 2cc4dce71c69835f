"""The store's one migration path: chains of numbered steps, run alike on SQLite, PostgreSQL and MySQL.

A `MigrationChain` belongs to one schema module (the account store's is
`store_schema.STORE_MIGRATIONS`; a module that adds tables of its own, such as
client keys, brings its own chain) and lists the versions it applied in a
bookkeeping table of its own, so chains written by different modules never
compete for a version number. `apply_chains` runs every missing step of each
chain in order, committing after each one; the caller holds the lock that
keeps two processes from migrating at once (a file lock for the SQLite file, a
database lock for a shared database: MySQL's DDL is not transactional, so the
lock, not a transaction, keeps a step whole there). A store migrated by a
newer q2api than this one is refused rather than misread.

Steps are plain synchronous SQLAlchemy (DDL helpers such as `create_all` exist
only in that form): a shared database runs them through the async engine's
`run_sync`, the SQLite file on a worker thread.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import sqlalchemy as sa

Step = Callable[[sa.Connection], None]


@dataclasses.dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Step


@dataclasses.dataclass(frozen=True)
class MigrationChain:
    name: str
    bookkeeping: sa.Table  # made with `bookkeeping_table`
    steps: tuple[Migration, ...]

    def __post_init__(self) -> None:
        versions = [step.version for step in self.steps]
        if versions != sorted(set(versions)):
            raise ValueError(f"the {self.name} migrations must have increasing versions, not {versions}")

    @property
    def newest(self) -> int:
        return self.steps[-1].version if self.steps else 0


class SchemaTooNew(Exception):
    """The store was migrated by a newer q2api than this one."""


def bookkeeping_table(name: str, metadata: sa.MetaData) -> sa.Table:
    """The table where a chain lists the versions it applied."""
    return sa.Table(
        name,
        metadata,
        sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("description", sa.String(255), nullable=False),
        sa.Column("applied_at", sa.Double(), nullable=False),
    )


def create(*tables: sa.Table) -> Step:
    """A step that creates `tables` (each skipped when it exists: a step interrupted on MySQL is re-run)."""

    def apply(connection: sa.Connection) -> None:
        for table in tables:
            table.create(connection, checkfirst=True)

    return apply


def add_column(table: sa.Table, column_name: str) -> Step:
    """A step that adds `table`'s declared column `column_name` to a table created without it.

    A NOT NULL column needs a server default (`server_default=` in its declaration) for the rows
    already there.
    """

    def apply(connection: sa.Connection) -> None:
        present = {column["name"] for column in sa.inspect(connection).get_columns(table.name)}
        if column_name in present:
            return
        spec = sa.schema.CreateColumn(table.c[column_name]).compile(dialect=connection.dialect)
        connection.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {spec}"))

    return apply


def apply_chains(connection: sa.Connection, chains: Sequence[MigrationChain]) -> list[tuple[str, int]]:
    """Apply every missing step of `chains`, in order; the (chain, version) pairs this call applied.

    Call under the store's migration lock. Raises SchemaTooNew before applying anything.
    """
    done: dict[str, set[int]] = {}
    for chain in chains:
        chain.bookkeeping.create(connection, checkfirst=True)
        connection.commit()
        done[chain.name] = set(connection.scalars(sa.select(chain.bookkeeping.c.version)))
        if done[chain.name] and max(done[chain.name]) > chain.newest:
            raise SchemaTooNew(
                f"the store's {chain.name} schema is at version {max(done[chain.name])}, newer than this q2api "
                f"knows ({chain.newest}); upgrade q2api"
            )
    applied: list[tuple[str, int]] = []
    for chain in chains:
        for step in chain.steps:
            if step.version in done[chain.name]:
                continue
            step.apply(connection)
            connection.execute(
                sa.insert(chain.bookkeeping).values(
                    version=step.version, description=step.description, applied_at=time.time()
                )
            )
            connection.commit()  # one step at a time: a later failure keeps the earlier steps
            applied.append((chain.name, step.version))
    return applied
