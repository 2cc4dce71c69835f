"""What a model takes in `additionalModelRequestFields`: its native reasoning switches (docs/protocol.md#native-thinking).

`ListAvailableModels` advertises, per model, an `additionalModelRequestFieldsSchema` (a JSON
schema; JW `kiro/native_reasoning.py` quotes the one of `claude-opus-4.6`): the `thinking.type`
values it takes (`adaptive`, `disabled`, …), `thinking.display`, the `output_config.effort` levels
with their default, a `max_tokens` range — or, for the GPT-5.6 family, `reasoning.effort` alone
(opencodex PR #4719). The schema says `additionalProperties: false`, and the service refuses a
property outside it ("Invalid additionalModelRequestFields: property 'reasoning' is not defined in
the schema"), so a request sends only what the schema declares. A model without the schema has no
native reasoning: it keeps the `<thinking>` tag convention.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Effort levels from least to most, to map a requested level onto those a model takes.
EFFORT_ORDER = ("minimal", "low", "medium", "high", "xhigh", "max")


class EffortField(enum.Enum):
    OUTPUT_CONFIG = "output_config"  # {"output_config": {"effort": …}} beside a `thinking` object (Claude)
    REASONING = "reasoning"  # {"reasoning": {"effort": …}} (GPT-5.6)


@dataclass(frozen=True, slots=True)
class ReasoningFields:
    """The reasoning part of one model's `additionalModelRequestFieldsSchema`."""

    thinking_types: tuple[str, ...] = ()  # `thinking.type` values, e.g. ("adaptive", "disabled")
    displays: tuple[str, ...] = ()  # `thinking.display` values
    thinking_keys: frozenset[str] = frozenset()  # the properties `thinking` may carry (type, display, budget_tokens…)
    effort_field: EffortField | None = None
    efforts: tuple[str, ...] = ()
    default_effort: str | None = None
    max_tokens_range: tuple[int, int] | None = None  # (minimum, maximum) of a top-level `max_tokens`

    @property
    def native(self) -> bool:
        """The model reasons natively when asked: it takes a thinking type other than `disabled`, or an effort."""
        return any(kind != "disabled" for kind in self.thinking_types) or self.effort_field is EffortField.REASONING

    def effort(self, requested: str | None) -> str | None:
        """`requested` mapped onto the levels the model takes (the nearest, the higher one on a tie);
        None when the model takes no effort or none was asked for."""
        if requested is None or not self.efforts:
            return None
        if requested in self.efforts:
            return requested
        if requested not in EFFORT_ORDER:
            return self.default_effort or self.efforts[-1]
        wanted = EFFORT_ORDER.index(requested)

        def distance(level: str) -> tuple[int, int]:
            position = EFFORT_ORDER.index(level) if level in EFFORT_ORDER else 0
            return abs(position - wanted), -position

        return min(self.efforts, key=distance)


def parse_reasoning_fields(schema: object) -> ReasoningFields | None:
    """The reasoning switches a model's `additionalModelRequestFieldsSchema` declares; None when it
    declares none (no schema, or one without `thinking` / an effort)."""
    if not isinstance(schema, Mapping):
        return None
    properties = _mapping(schema.get("properties"))
    thinking = _mapping(_mapping(properties.get("thinking")).get("properties"))
    thinking_types = _enum(thinking.get("type"))
    displays = _enum(thinking.get("display"))
    effort_field = None
    efforts: tuple[str, ...] = ()
    default_effort = None
    for field in EffortField:
        effort = _mapping(_mapping(_mapping(properties.get(field.value)).get("properties")).get("effort"))
        if effort:
            effort_field = field
            efforts = _enum(effort)
            default = effort.get("default")
            default_effort = default if isinstance(default, str) else None
            break
    max_tokens = _mapping(properties.get("max_tokens"))
    low, high = max_tokens.get("minimum"), max_tokens.get("maximum")
    max_tokens_range = (low, high) if type(low) is int and type(high) is int else None
    if not thinking_types and effort_field is None:
        return None
    return ReasoningFields(
        thinking_types=thinking_types,
        displays=displays,
        thinking_keys=frozenset(thinking),
        effort_field=effort_field,
        efforts=efforts,
        default_effort=default_effort,
        max_tokens_range=max_tokens_range if "max_tokens" in properties else None,
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _enum(value: object) -> tuple[str, ...]:
    values = _mapping(value).get("enum")
    return tuple(item for item in values if isinstance(item, str)) if isinstance(values, list) else ()
