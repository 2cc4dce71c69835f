"""The credits of a reply Amazon Q did not meter: learned from the metered ones, per model first, and
never less than what Amazon Q meters a reply to."""

from __future__ import annotations

import pytest

from q2api.tenants.credit_estimate import MINIMUM_CREDITS, CreditEstimate


def test_before_any_metered_reply_an_unmetered_one_costs_the_minimum_not_nothing() -> None:
    assert CreditEstimate().estimate("claude-sonnet-4.5", 5000) == MINIMUM_CREDITS == 0.01


def test_the_rate_of_the_model_then_of_every_model_and_never_below_the_minimum() -> None:
    estimate = CreditEstimate()
    estimate.observe("claude-sonnet-4.5", 10_000, 0.5)  # 0.05 a thousand tokens
    estimate.observe("claude-haiku-4.5", 10_000, 0.1)  # 0.01 a thousand tokens
    assert estimate.estimate("claude-sonnet-4.5", 4_000) == pytest.approx(0.2)
    assert estimate.estimate("claude-haiku-4.5", 4_000) == pytest.approx(0.04)
    assert estimate.estimate("claude-opus-4.5", 4_000) == pytest.approx(0.12)  # no reply of its own: every model's
    assert estimate.estimate("claude-haiku-4.5", 20) == MINIMUM_CREDITS  # 0.0002 by the rate
    estimate.observe("claude-haiku-4.5", 0, 1.0)  # no tokens: nothing to learn from
    assert estimate.estimate("claude-haiku-4.5", 4_000) == pytest.approx(0.04)
