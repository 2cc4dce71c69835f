"""An account's credits, as `getUsageLimits` reports them (docs/protocol.md#credits).

Credits left = the sum over the usage breakdown of (limit − used), active bonuses and an active
free trial included. A failure to read them is never a reason to fail a chat request.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from q2api.amazonq.service_api import GET_USAGE_LIMITS, ORIGIN, ServiceApi

RESOURCE_TYPE = "AGENTIC_REQUEST"
_ACTIVE = "ACTIVE"


@dataclass(frozen=True, slots=True)
class Credits:
    subscription: str | None  # the plan, e.g. "KIRO FREE"
    used: float
    limit: float
    resets_at: float | None  # Unix time the period resets
    fetched_at: float | None = None  # Unix time of the answer

    @property
    def remaining(self) -> float:
        return max(self.limit - self.used, 0.0)

    @property
    def exhausted(self) -> bool:
        """Every credit of the period is spent (an account without a limit never is)."""
        return self.limit > 0 and self.used >= self.limit

    def as_dict(self) -> dict[str, Any]:
        """`{"subscription", "used", "limit", "resets_at"}`, `resets_at` as ISO 8601 UTC (or None)."""
        return {
            "subscription": self.subscription,
            "used": _number(self.used),
            "limit": _number(self.limit),
            "resets_at": iso_time(self.resets_at),
        }


def parse_usage_limits(document: Mapping[str, Any], fetched_at: float | None = None) -> Credits:
    used = limit = 0.0
    reset = _float(document.get("nextDateReset"))
    for entry in _dicts(document.get("usageBreakdownList")):
        used += _amount(entry, "currentUsage")
        limit += _amount(entry, "usageLimit")
        reset = reset or _float(entry.get("nextDateReset"))
        for bonus in _dicts(entry.get("bonuses")):
            if bonus.get("status") == _ACTIVE:
                used += _amount(bonus, "currentUsage")
                limit += _amount(bonus, "usageLimit")
        trial = entry.get("freeTrialInfo")
        if isinstance(trial, dict) and trial.get("freeTrialStatus") == _ACTIVE:
            used += _amount(trial, "currentUsage")
            limit += _amount(trial, "usageLimit")
    info = document.get("subscriptionInfo")
    title = info.get("subscriptionTitle") if isinstance(info, dict) else None
    subscription = title.strip() or None if isinstance(title, str) else None
    return Credits(subscription, used, limit, reset, fetched_at)


async def fetch_credits(
    api: ServiceApi,
    token: str,
    *,
    profile_arn: str | None,
    fetched_at: float | None = None,
    token_type: str | None = None,
    proxy_url: str | None = None,
) -> Credits:
    """The account's credits now. Raises the `q2api.amazonq.errors` classes."""
    params: dict[str, str | int] = {"origin": ORIGIN, "resourceType": RESOURCE_TYPE}
    if profile_arn:
        params["profileArn"] = profile_arn
    return parse_usage_limits(
        await api.call(GET_USAGE_LIMITS, params, token, token_type=token_type, proxy_url=proxy_url), fetched_at
    )


def iso_time(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat().replace("+00:00", "Z")


def _amount(entry: Mapping[str, Any], key: str) -> float:
    """`{key}WithPrecision` when present (fractional credits), else `{key}`."""
    return _float(entry.get(f"{key}WithPrecision")) or _float(entry.get(key)) or 0.0


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _dicts(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _number(value: float) -> float | int:
    return int(value) if value.is_integer() else round(value, 4)
