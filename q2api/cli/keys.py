"""`q2api keys create | list | show | update | revoke`: client keys kept in the store, with their limits.

`create` prints the new key once, on stdout alone (the store keeps only its SHA-256), so that
`KEY=$(q2api keys create --label ci)` captures it; everything else goes to stderr. A key is named
by its id (`key_…`) or its label.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson

from q2api.admin.responses import iso_time
from q2api.settings import Settings, SettingsError, load_settings
from q2api.store.database import StoreDatabase
from q2api.store.errors import STORE_ERRORS
from q2api.tenants.counters import Counters, StoreCounters
from q2api.tenants.database import open_tenant_database
from q2api.tenants.gate import LimitGate
from q2api.tenants.keys import (
    LIMIT_FIELDS,
    KeyProblem,
    KeyRecord,
    KeyStore,
    limits_as_given,
    parse_expiry,
    parse_models,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
T = TypeVar("T")
NONE = "none"  # `--rpm none`: lift a limit
_UNSET = object()


def add_keys_parser(commands: Any) -> None:
    keys = commands.add_parser(
        "keys",
        help="client keys kept in the store, with models, rates and budgets",
        description="Client keys kept in the store (beside Q2API_API_KEYS, which stay unlimited). "
        "A key is named by its id or label.",
    )
    key_commands = keys.add_subparsers(dest="keys_command", metavar="COMMAND")
    create = key_commands.add_parser(
        "create",
        help="make a key; it is printed once, and only its hash is stored",
        description="Make a client key with its limits. The key is printed once, alone on stdout "
        "(KEY=$(q2api keys create --label ci)); the store keeps only its SHA-256.",
    )
    create.add_argument("--label", required=True, help="the key's name in logs, the ledger and /metrics")
    _limit_flags(create, lift=False)
    listing = key_commands.add_parser(
        "list",
        help="every key with its limits and today's spend",
        description="Every key in the store (revoked ones too), its limits and the credits it spent today.",
    )
    listing.add_argument("--json", action="store_true", help="as JSON")
    show = key_commands.add_parser(
        "show", help="one key", description="One key's limits, status and spend today and this month (never the key)."
    )
    show.add_argument("key", help="its id or label")
    show.add_argument("--json", action="store_true", help="as JSON")
    update = key_commands.add_parser(
        "update",
        help="change a key's label or limits ('none' lifts a limit)",
        description="Change a key's label or limits; a limit given as 'none' is lifted, one left out stays.",
    )
    update.add_argument("key", help="its id or label")
    update.add_argument("--label", help="a new label")
    _limit_flags(update, lift=True)
    revoke = key_commands.add_parser(
        "revoke",
        help="stop a key (within seconds on every worker and replica)",
        description="Stop a key for good: its requests are refused (401) within seconds on every worker and replica.",
    )
    revoke.add_argument("key", help="its id or label")
    keys.set_defaults(run=run_keys_command, group=keys)  # `q2api keys` alone prints its help


def _number(kind: type[int] | type[float], lift: bool) -> Callable[[str], object]:
    def parse(raw: str) -> object:
        if lift and raw.strip().lower() == NONE:
            return None
        try:
            return kind(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number{' or none' if lift else ''}, got {raw!r}") from None

    return parse


def _limit_flags(parser: argparse.ArgumentParser, *, lift: bool) -> None:
    default = _UNSET if lift else None
    parser.add_argument("--models", default=default, help="comma-separated model ids the key may use (default: all)")
    parser.add_argument("--expires", default=default, help="2027-01-01, an RFC 3339 time, or 30d / 12h from now")
    parser.add_argument("--rpm", type=_number(int, lift), default=default, help="requests a minute")
    parser.add_argument("--tpm", type=_number(int, lift), default=default, help="tokens a minute (input and output)")
    parser.add_argument("--max-concurrent", type=_number(int, lift), default=default, help="requests in flight")
    parser.add_argument("--credits-per-day", type=_number(float, lift), default=default, help="credits a UTC day")
    parser.add_argument("--credits-per-month", type=_number(float, lift), default=default, help="credits a UTC month")


def run_keys_command(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"q2api: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_run(settings, args))
    except KeyProblem as problem:
        print(f"q2api keys: {problem}", file=sys.stderr)
        return EXIT_FAILED if problem.missing or problem.conflict else EXIT_USAGE
    except ValueError as exc:
        print(f"q2api keys: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except STORE_ERRORS as exc:
        print(f"q2api keys: {exc}", file=sys.stderr)
        return EXIT_FAILED


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    database = await open_tenant_database(settings.database_url, settings.data_dir)
    try:
        return await _command(settings, database, args)
    finally:
        await database.close()


async def _command(settings: Settings, database: StoreDatabase, args: argparse.Namespace) -> int:
    store = KeyStore(database)
    command = args.keys_command
    if command == "create":
        limits = limits_as_given(
            models=args.models,
            expires=args.expires,
            rpm=args.rpm,
            tpm=args.tpm,
            max_concurrent=args.max_concurrent,
            credits_per_day=args.credits_per_day,
            credits_per_month=args.credits_per_month,
        )
        key, record = await store.create(args.label, limits)
        print(f"created {record.id} ({record.label}); the key is shown this once:", file=sys.stderr)
        print(key)
        return EXIT_OK
    if command == "revoke":
        record = await store.revoke(args.key)
        print(f"revoked {record.id} ({record.label})", file=sys.stderr)
        return EXIT_OK
    if command == "update":
        changes = _changes(args)
        if not changes:
            print("q2api keys update: nothing to change (give --label or a limit)", file=sys.stderr)
            return EXIT_USAGE
        record = await store.update(args.key, changes)
        _print_key(record, (await _spent(settings, database, [record]))[record.id], as_json=False)
        return EXIT_OK
    if command == "show":
        record = await store.find(args.key)
        _print_key(record, (await _spent(settings, database, [record]))[record.id], as_json=args.json)
        return EXIT_OK
    records = await store.list()
    spent = await _spent(settings, database, records)
    if args.json:
        print(orjson.dumps([{**record.as_dict(), **spent[record.id]} for record in records]).decode())
        return EXIT_OK
    _print_table(records, spent)
    return EXIT_OK


def _changes(args: argparse.Namespace) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if args.label is not None:
        changes["label"] = args.label
    if args.models is not _UNSET:
        changes["models"] = None if args.models.strip().lower() == NONE else parse_models(args.models)
    if args.expires is not _UNSET:
        changes["expires_at"] = None if args.expires.strip().lower() == NONE else parse_expiry(args.expires)
    for field in LIMIT_FIELDS:
        if field in ("models", "expires_at"):
            continue
        value = getattr(args, field)
        if value is not _UNSET:
            changes[field] = value
    return changes


async def _spent(settings: Settings, database: StoreDatabase, records: list[KeyRecord]) -> dict[str, dict[str, float]]:
    """Each key's spend by its id, read through one connection to the counters for them all."""
    counters: Counters
    if settings.redis_url:
        from q2api.tenants.redis_counters import RedisCounters

        counters = RedisCounters(settings.redis_url, settings.redis_prefix)
    else:
        counters = StoreCounters(database)
    try:
        gate = LimitGate(counters)
        return {record.id: await _quietly(gate.spent(record), {}) for record in records}
    finally:
        await counters.close()


async def _quietly(work: Awaitable[T], fallback: T) -> T:
    try:
        return await work
    except Exception:  # spend is a courtesy of the listing: a counter store that is down leaves it out
        return fallback


def _limits_text(record: KeyRecord) -> str:
    limits = record.limits
    parts = []
    for name, value in (
        ("rpm", limits.rpm),
        ("tpm", limits.tpm),
        ("concurrent", limits.max_concurrent),
        ("credits/day", limits.credits_per_day),
        ("credits/month", limits.credits_per_month),
    ):
        if value is not None:
            parts.append(f"{name}={value:g}")
    return " ".join(parts) or "-"


def _print_table(records: list[KeyRecord], spent: dict[str, dict[str, float]]) -> None:
    rows = [("ID", "LABEL", "STATUS", "PREFIX", "MODELS", "LIMITS", "EXPIRES", "CREDITS TODAY")]
    for record in records:
        rows.append(
            (
                record.id,
                record.label,
                record.status(time.time()),
                record.key_prefix + "…",
                ",".join(record.limits.models) if record.limits.models else "all",
                _limits_text(record),
                iso_time(record.limits.expires_at) or "-",
                _credits(spent[record.id].get("credits_today")),
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _credits(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"  # "-": the counters did not answer, not "nothing spent"


def _print_key(record: KeyRecord, spent: dict[str, float], *, as_json: bool) -> None:
    document = {**record.as_dict(), "status": record.status(time.time()), **spent}
    if as_json:
        print(orjson.dumps(document).decode())
        return
    for name, value in document.items():
        shown = value
        if name.endswith("_at") and isinstance(value, float):
            shown = iso_time(value)
        elif isinstance(value, list):
            shown = ",".join(value)
        print(f"{name}: {'-' if shown is None else shown}")
