"""q2api: a Claude Messages API gateway for Amazon Q Developer / Kiro subscriptions."""

__version__ = "0.1.0"
