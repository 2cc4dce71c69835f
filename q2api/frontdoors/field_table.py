"""What a front door does with every field its clients can send: the vocabulary of the field tables.

Each door keeps one table (`claude_fields`, `chat/fields`, `responses/fields`) of the request
shapes of the current official SDKs — named as the SDK names its request types (`TextBlockParam`,
`ChatCompletionToolParam`; the `Beta` prefix dropped: a beta shape and its plain namesake are one
shape) — and, for each field, one of four treatments:

* honoured: the gateway does what the field asks, with Amazon Q's own means;
* emulated: Amazon Q has no such thing, so the gateway does it itself (how is said);
* ignored: the field changes nothing that matters through the gateway (why is said);
* refused: a 400 naming the field, and what to do instead.

A whole shape may take one treatment (a tool the gateway refuses, an artefact it ignores): its
fields then need no rows of their own. A test walks the installed SDKs' request types and fails
on any field no table classifies (tests/frontdoors/test_field_tables.py), so a new SDK release says
what it added; the tables are printed in docs/clients.md (`markdown`, checked by tests/test_docs.py).

A field in no table — a client newer than the gateway — is taken out by the door's parser and
named by `report_unknown_fields` (a WARNING once per field per process): never dropped unseen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from loguru import logger

# A path's list indices (`messages.3.content`, `input[2]`), replaced by `*` to name a field once for all its places.
_INDEX = re.compile(r"\.\d+(?=\.|\[|$)|\[\d+\]")
_REPORTED_LIMIT = 256  # distinct unknown fields remembered for the once-per-process WARNING
_reported: set[str] = set()


class Treatment(StrEnum):
    HONOURED = "honoured"
    EMULATED = "emulated"
    IGNORED = "ignored"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Rule:
    treatment: Treatment
    note: str = ""  # how it is honoured or emulated, why ignoring it is harmless, what to do instead

    def __post_init__(self) -> None:
        if self.treatment in (Treatment.IGNORED, Treatment.REFUSED, Treatment.EMULATED) and not self.note:
            raise ValueError(f"a field {self.treatment} needs its reason")


def honoured(note: str = "") -> Rule:
    return Rule(Treatment.HONOURED, note)


def emulated(how: str) -> Rule:
    return Rule(Treatment.EMULATED, how)


def ignored(why: str) -> Rule:
    return Rule(Treatment.IGNORED, why)


def refused(instead: str) -> Rule:
    return Rule(Treatment.REFUSED, instead)


# How every door treats a JSON schema the reply must follow (Claude's `output_config.format`, the
# OpenAI doors' `response_format` and `text.format`): q2api.anthropic.reply_content checks the reply.
SCHEMA_CHECKED = emulated("checked within limits (no retrieval, RE2 patterns, a deadline)")


@dataclass(frozen=True, slots=True)
class Shape:
    """One request shape: `name` as the SDK calls it, `wire` where it sits in a request; either a
    `rule` for the whole shape or one rule per field (`type`, the tag, needs none)."""

    name: str
    wire: str
    rule: Rule | None = None
    fields: Mapping[str, Rule] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()  # other SDK names of the same shape


class FieldTable:
    def __init__(self, door: str, shapes: Iterable[Shape]) -> None:
        self.door = door
        self.shapes = tuple(shapes)
        self._by_name: dict[str, Shape] = {}
        for shape in self.shapes:
            for name in (shape.name, *shape.aliases):
                if name in self._by_name:
                    raise ValueError(f"{name} is in the {door} table twice")
                self._by_name[name] = shape

    def shape(self, name: str) -> Shape | None:
        return self._by_name.get(name)

    def rule(self, shape_name: str, field_name: str) -> Rule | None:
        """The treatment of one field: its own row, else its shape's."""
        shape = self._by_name.get(shape_name)
        if shape is None:
            return None
        return shape.fields.get(field_name) or shape.rule

    def refused_fields(self) -> dict[tuple[str, str], Rule]:
        """(shape, field) → rule, for every field row that is refused."""
        return {
            (shape.name, name): rule
            for shape in self.shapes
            for name, rule in shape.fields.items()
            if rule.treatment is Treatment.REFUSED
        }

    def markdown(self) -> str:
        """The table as docs/clients.md prints it: one row per shape rule or field rule."""
        lines = ["| where | field | treatment | how, why, or what to do instead |", "|---|---|---|---|"]
        for shape in self.shapes:
            where = f"{shape.wire} (`{shape.name}`)"
            if shape.rule is not None:
                lines.append(_row(where, "*(all)*", shape.rule))
            for name, rule in shape.fields.items():
                lines.append(_row(where, f"`{name}`", rule))
        return "\n".join(lines)


def report_unknown_fields(paths: tuple[str, ...]) -> None:
    """Name fields no request type declares: a WARNING the first time a field is seen, DEBUG after."""
    if not paths:
        return
    fields = sorted({_INDEX.sub(_any_index, path) for path in paths})
    new = [field for field in fields if field not in _reported]
    if new and len(_reported) < _REPORTED_LIMIT:
        _reported.update(new)
        logger.warning(
            f"request fields q2api does not know were ignored: {', '.join(new)} (a client newer than the gateway; "
            "they are left out of the request and nothing else changes)"
        )
    else:
        logger.debug(f"request fields q2api does not know were ignored: {', '.join(fields)}")


def _any_index(match: re.Match[str]) -> str:
    return "[*]" if match[0].startswith("[") else ".*"


def _row(where: str, name: str, rule: Rule) -> str:
    note = rule.note.replace("|", "\\|").replace("\n", " ")
    return f"| {where} | {name} | {rule.treatment} | {note} |"
