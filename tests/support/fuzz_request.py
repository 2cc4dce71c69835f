"""One fuzzed request, and a document made into one (shared by the door fuzzers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.support.hostile_values import Hostile


@dataclass(frozen=True)
class FuzzRequest:
    method: str
    path: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def finish(h: Hostile, path: str, document: Any) -> FuzzRequest:
    """The document's bytes; of the untamed bodies, one in twenty is any JSON value instead, one in five damaged."""
    if not h.tame and h.chance(0.05):
        document = h.value()
    body = h.encode(document)
    if not h.tame and h.chance(0.2):
        body = h.damage(body)
    return FuzzRequest("POST", path, body)
