"""Credits for a reply Amazon Q did not meter: an estimate, always marked as one.

Amazon Q reports the credits of most replies (`meteringEvent`, docs/protocol.md#prompt-caching-and-metering);
when a reply carries none — a reply cut at the client's `max_tokens` ends before its metering, a
stream broken off — its credits are estimated from its tokens at the rate the metered replies of the
same model showed in this process (credits per thousand tokens, a running mean); before any metered
reply of that model, the rate of every model together. Never less than MINIMUM_CREDITS, what Amazon Q
meters a reply to: an estimate of 0 would let a key with a budget and a small `max_tokens` spend
without end (issue 30), since a budget is checked against the credits counted.
"""

from __future__ import annotations

import dataclasses

MINIMUM_CREDITS = 0.01  # Amazon Q meters credits to 0.01: a reply it served costs at least that


@dataclasses.dataclass(slots=True)
class _Rate:
    credits: float = 0.0
    tokens: int = 0

    def per_token(self) -> float | None:
        return self.credits / self.tokens if self.tokens else None


class CreditEstimate:
    def __init__(self) -> None:
        self._by_model: dict[str, _Rate] = {}
        self._overall = _Rate()

    def observe(self, model: str, tokens: int, credits: float) -> None:
        """A metered reply: `tokens` (input and output) cost `credits`."""
        if tokens <= 0:
            return
        for rate in (self._by_model.setdefault(model, _Rate()), self._overall):
            rate.credits += credits
            rate.tokens += tokens

    def estimate(self, model: str, tokens: int) -> float:
        """The credits of an unmetered reply of `model` that used `tokens` (at least MINIMUM_CREDITS)."""
        rate = self._by_model.get(model)
        per_token = (rate.per_token() if rate else None) or self._overall.per_token() or 0.0
        return max(round(per_token * tokens, 4), MINIMUM_CREDITS)
