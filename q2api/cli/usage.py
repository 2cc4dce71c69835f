"""`q2api usage [--by key|model|account|day] [--since 7d] [--format table|csv|json]`: what the ledger holds."""

from __future__ import annotations

import argparse
import asyncio
import csv
import sys
from typing import Any

import orjson

from q2api.settings import SettingsError, load_settings
from q2api.store.errors import STORE_ERRORS
from q2api.tenants.database import open_tenant_database
from q2api.tenants.usage_report import GROUPS, TOTALS, parse_since, usage_by

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def add_usage_parser(commands: Any) -> None:
    usage = commands.add_parser(
        "usage",
        help="requests, tokens and credits from the usage ledger",
        description="Totals from the usage ledger (one row per request, daily sums past the retention).",
    )
    usage.add_argument("--by", choices=GROUPS, default="key", help="group by (default: key)")
    usage.add_argument("--since", default="7d", help="7d, 24h, 30m, or a date (2026-11-01); default 7d")
    usage.add_argument("--format", choices=("table", "csv", "json"), default="table", help="default: table")
    usage.set_defaults(run=run_usage_command)


def run_usage_command(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
        since = parse_since(args.since)
    except (SettingsError, ValueError) as exc:
        print(f"q2api usage: {exc}", file=sys.stderr)
        return EXIT_USAGE

    async def read() -> list[dict[str, Any]]:
        database = await open_tenant_database(settings.database_url, settings.data_dir)
        try:
            return await usage_by(database, args.by, since)
        finally:
            await database.close()

    try:
        rows = asyncio.run(read())
    except STORE_ERRORS as exc:
        print(f"q2api usage: {exc}", file=sys.stderr)
        return EXIT_FAILED
    columns = (args.by, *TOTALS)
    if args.format == "json":
        print(orjson.dumps(rows).decode())
    elif args.format == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([row[column] for column in columns])
    else:
        table = [tuple(column.upper().replace("_", " ") for column in columns)]
        table += [tuple(_cell(row[column]) for column in columns) for row in rows]
        widths = [max(len(line[index]) for line in table) for index in range(len(columns))]
        for line in table:
            print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
        if not rows:
            print("(no requests in the ledger since then)", file=sys.stderr)
    return EXIT_OK


def _cell(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)
