"""What the ledger says: totals grouped by key, model, account or day (`q2api usage`, `/admin/api/usage`),
and the console's usage page (requests and credits per hour or day, stacked by key or model; the top
keys and models; the error rate; TTFT percentiles).

The rows still in the ledger and the daily sums of older ones are read together, so a report reaching
past the retention still adds up.
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Sequence
from typing import Any, Literal

import sqlalchemy as sa

from q2api.store.database import StoreDatabase
from q2api.tenants.tables import usage, usage_daily

GroupBy = Literal["key", "model", "account", "day"]
GROUPS: tuple[GroupBy, ...] = ("key", "model", "account", "day")
NO_KEY = "(environment key)"  # how a request without a store key is shown
_SINCE = re.compile(r"^(\d{1,4})([dhm])$")
_SECONDS = {"d": 86400, "h": 3600, "m": 60}
_COLUMN = {"key": "key_label", "model": "model", "account": "account", "day": "day"}
TOTALS = (
    "requests",
    "errors",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "credits",
    "estimated_requests",
)


def parse_since(text: str, now: float | None = None) -> float:
    """`7d`, `24h`, `30m` ago, or a date (`2026-11-01`, UTC) → epoch seconds (ValueError naming the form)."""
    now = time.time() if now is None else now
    relative = _SINCE.match(text.strip())
    if relative:
        return now - int(relative.group(1)) * _SECONDS[relative.group(2)]
    try:
        moment = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"since: {text!r} is neither a duration (7d, 24h, 30m) nor a date (2026-11-01)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _day(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC).strftime("%Y-%m-%d")


def _recent_sums(group: sa.ColumnElement[Any] | None) -> list[sa.ColumnElement[Any]]:
    columns: list[sa.ColumnElement[Any]] = [
        sa.func.count().label("requests"),
        sa.func.coalesce(sa.func.sum(sa.case((usage.c.status >= 400, 1), else_=0)), 0).label("errors"),
    ]
    for name in TOTALS[2:7]:
        columns.append(sa.func.coalesce(sa.func.sum(usage.c[name]), 0).label(name))
    columns.append(
        sa.func.coalesce(sa.func.sum(sa.case((usage.c.credits_estimated, 1), else_=0)), 0).label("estimated_requests")
    )
    return ([group.label("group")] if group is not None else []) + columns


def _daily_sums(group: sa.ColumnElement[Any] | None) -> list[sa.ColumnElement[Any]]:
    columns: list[sa.ColumnElement[Any]] = [
        sa.func.coalesce(sa.func.sum(usage_daily.c[name]), 0).label(name) for name in TOTALS
    ]
    return ([group.label("group")] if group is not None else []) + columns


def _add(into: dict[str, Any], row: sa.Row[Any]) -> None:
    for name in TOTALS:
        into[name] = into.get(name, 0) + (row._mapping[name] or 0)


def _clean(totals: dict[str, Any]) -> dict[str, Any]:
    for name in TOTALS:
        totals[name] = round(float(totals.get(name, 0)), 4) if name == "credits" else int(totals.get(name, 0))
    return totals


async def usage_by(
    database: StoreDatabase, by: GroupBy, since: float, until: float | None = None
) -> list[dict[str, Any]]:
    """The totals of each key, model, account or day since `since`, largest credits first (days in order)."""
    until = time.time() + 1 if until is None else until
    column = _COLUMN[by]

    def select(db: sa.Connection) -> list[dict[str, Any]]:
        groups: dict[Any, dict[str, Any]] = {}
        recent = sa.select(*_recent_sums(usage.c[column])).where(usage.c.at >= since, usage.c.at < until)
        for row in db.execute(recent.group_by(usage.c[column])):
            _add(groups.setdefault(row.group, {}), row)
        older = sa.select(*_daily_sums(usage_daily.c[column])).where(
            usage_daily.c.day >= _day(since), usage_daily.c.day <= _day(until)
        )
        for row in db.execute(older.group_by(usage_daily.c[column])):
            _add(groups.setdefault(row.group, {}), row)
        return [{by: (name if name is not None else NO_KEY), **_clean(totals)} for name, totals in groups.items()]

    rows = await database.read(select)
    if by == "day":
        return sorted(rows, key=lambda row: row["day"])
    return sorted(rows, key=lambda row: (-row["credits"], -row["requests"], str(row[by])))


def _percentile(sorted_values: Sequence[float], fraction: float) -> float | None:
    if not sorted_values:
        return None
    index = min(round(fraction * (len(sorted_values) - 1)), len(sorted_values) - 1)
    return round(sorted_values[index], 1)


async def usage_overview(
    database: StoreDatabase, since: float, *, hourly: bool, stack: Literal["key", "model"], now: float | None = None
) -> dict[str, Any]:
    """The console's usage page: per bucket (hour or day) the requests and credits of each key (or
    model), the top keys and models, the error rate and the TTFT percentiles, since `since`."""
    now = time.time() if now is None else now
    column = _COLUMN[stack]

    def select(db: sa.Connection) -> dict[str, Any]:
        bucket = usage.c.hour if hourly else usage.c.day
        series: dict[tuple[Any, Any], list[float]] = {}
        recent = (
            sa.select(
                bucket.label("bucket"),
                usage.c[column].label("name"),
                sa.func.count().label("requests"),
                sa.func.coalesce(sa.func.sum(usage.c.credits), 0).label("credits"),
            )
            .where(usage.c.at >= since)
            .group_by(bucket, usage.c[column])
        )
        for row in db.execute(recent):
            entry = series.setdefault((row.bucket, row.name), [0, 0.0])
            entry[0] += row.requests
            entry[1] += float(row.credits)
        if not hourly:
            older = (
                sa.select(
                    usage_daily.c.day.label("bucket"),
                    usage_daily.c[column].label("name"),
                    sa.func.sum(usage_daily.c.requests).label("requests"),
                    sa.func.sum(usage_daily.c.credits).label("credits"),
                )
                .where(usage_daily.c.day >= _day(since))
                .group_by(usage_daily.c.day, usage_daily.c[column])
            )
            for row in db.execute(older):
                entry = series.setdefault((row.bucket, row.name), [0, 0.0])
                entry[0] += int(row.requests)
                entry[1] += float(row.credits)
        ttfts = sorted(
            float(value)
            for (value,) in db.execute(
                sa.select(usage.c.ttft_ms).where(usage.c.at >= since, usage.c.ttft_ms.is_not(None))
            )
        )
        return {"series": series, "ttfts": ttfts}

    found = await database.read(select)
    buckets = _buckets(since, now, hourly)
    names = sorted({name for _bucket, name in found["series"]}, key=lambda name: (name is None, str(name)))
    index = {bucket: position for position, bucket in enumerate(buckets)}
    stacks = []
    for name in names:
        requests = [0] * len(buckets)
        credits = [0.0] * len(buckets)
        for (bucket, series_name), (count, spent) in found["series"].items():
            key = _bucket_label(bucket, hourly)
            if series_name == name and key in index:
                requests[index[key]] += count
                credits[index[key]] = round(credits[index[key]] + spent, 4)
        stacks.append({"name": name if name is not None else NO_KEY, "requests": requests, "credits": credits})
    by_key = await usage_by(database, "key", since)
    by_model = await usage_by(database, "model", since)
    total_requests = sum(row["requests"] for row in by_key)
    total_errors = sum(row["errors"] for row in by_key)
    return {
        "since": since,
        "bucket": "hour" if hourly else "day",
        "stack": stack,
        "buckets": buckets,
        "stacks": stacks,
        "top_keys": by_key[:10],
        "top_models": by_model[:10],
        "requests": total_requests,
        "errors": total_errors,
        "error_rate": round(total_errors / total_requests, 4) if total_requests else 0.0,
        "credits": round(sum(row["credits"] for row in by_key), 4),
        "ttft_p50_ms": _percentile(found["ttfts"], 0.50),
        "ttft_p95_ms": _percentile(found["ttfts"], 0.95),
    }


def _bucket_label(bucket: Any, hourly: bool) -> str:
    if hourly:
        moment = datetime.datetime.fromtimestamp(int(bucket) * 3600, tz=datetime.UTC)
        return moment.strftime("%Y-%m-%dT%H:00Z")
    return str(bucket)


def _buckets(since: float, now: float, hourly: bool) -> list[str]:
    step = 3600 if hourly else 86400
    first = int(since // step)
    last = int(now // step)
    return [_bucket_label(n, True) if hourly else _day(n * 86400) for n in range(first, last + 1)]
