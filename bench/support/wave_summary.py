"""A wave of streams in a few figures: TTFT and longest-gap percentiles, errors, and what went wrong.

Percentiles are over the streams that succeeded; the failed ones are counted
and their errors grouped, so a limit that refuses streams (a 503, a reset) is
not hidden behind good percentiles of the rest.
"""

from __future__ import annotations

import collections
import dataclasses
import re

from bench.support.lean_client import StreamResult
from bench.support.report import ms, percentile

# A connect that took this long waited for a SYN retry: some listen queue overflowed.
SLOW_CONNECT = 0.9


@dataclasses.dataclass(frozen=True)
class WaveSummary:
    streams: int
    failed: int
    errors: list[tuple[str, int]]  # (error, how many), the commonest first
    ttft_p50: float
    ttft_p99: float
    ttft_max: float
    gap_p50: float
    gap_p99: float
    gap_max: float
    connect_p99: float
    late_max: float  # the client's own delay in opening a stream after its scheduled start, at worst
    slow_connects: int
    texts_mean: float
    texts_min: int

    @classmethod
    def of(cls, results: list[StreamResult]) -> WaveSummary:
        good = [result for result in results if result.error is None and result.ttft is not None]
        errors = collections.Counter(_error_kind(result.error) for result in results if result.error is not None)
        ttfts = [result.ttft for result in good if result.ttft is not None]
        gaps = [result.max_gap for result in good]
        connects = [result.connect for result in results if result.connect is not None]
        return cls(
            streams=len(results),
            failed=len(results) - len(good),
            errors=errors.most_common(),
            ttft_p50=percentile(ttfts, 0.5),
            ttft_p99=percentile(ttfts, 0.99),
            ttft_max=max(ttfts, default=float("nan")),
            gap_p50=percentile(gaps, 0.5),
            gap_p99=percentile(gaps, 0.99),
            gap_max=max(gaps, default=float("nan")),
            connect_p99=percentile(connects, 0.99),
            late_max=max((result.late for result in results), default=0.0),
            slow_connects=sum(connect >= SLOW_CONNECT for connect in connects),
            texts_mean=sum(result.texts for result in good) / len(good) if good else 0.0,
            texts_min=min((result.texts for result in good), default=0),
        )

    def ttft_text(self) -> str:
        return f"p50 {ms(self.ttft_p50)}   p99 {ms(self.ttft_p99)}   max {ms(self.ttft_max)}"

    def gap_text(self) -> str:
        return f"p50 {ms(self.gap_p50)}   p99 {ms(self.gap_p99)}   max {ms(self.gap_max)}"

    def errors_text(self) -> str:
        if not self.failed:
            return "no error"
        kinds = "; ".join(f"{count}x {error}" for error, count in self.errors[:3])
        return f"{self.failed} of {self.streams} FAILED: {kinds}"

    def health_text(self) -> str:
        text = (
            f"{self.streams - self.failed} streams ok, text events each: mean {self.texts_mean:.1f}, "
            f"min {self.texts_min}; {self.errors_text()}"
        )
        text += f"; connect p99 {self.connect_p99 * 1000:.1f} ms; client launch delay max {self.late_max * 1000:.0f} ms"
        if self.slow_connects:
            text += f", {self.slow_connects} connects took >= 1 s (a listen queue overflowed: SYN retried)"
        return text

    def shortfalls(self, ttft_limit: float, gap_limit: float) -> list[str]:
        """Why this wave misses the targets (empty: it meets them)."""
        reasons = []
        if self.failed:
            reasons.append(self.errors_text())
        if not self.ttft_p99 <= ttft_limit:
            reasons.append(f"TTFT p99 {self.ttft_p99 * 1000:.0f} ms > {ttft_limit * 1000:g} ms")
        if not self.gap_p99 <= gap_limit:
            reasons.append(f"longest-gap p99 {self.gap_p99 * 1000:.0f} ms > {gap_limit * 1000:g} ms")
        if self.slow_connects:
            reasons.append(f"{self.slow_connects} connects waited for a SYN retry")
        return reasons


def _error_kind(error: str) -> str:
    """An error without what varies from stream to stream (numbers, bytes), so alike errors group."""
    return re.sub(r"\d+ texts", "N texts", error[:120])
