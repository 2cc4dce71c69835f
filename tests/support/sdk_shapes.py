"""The request shapes of the installed SDKs, walked field by field (for the front doors' field tables).

The SDKs describe requests as TypedDicts (`anthropic.types.MessageCreateParams`,
`openai.types.chat.CompletionCreateParams`, …). `sdk_fields` walks one from its root through every
field's type — unions, lists, dicts, `Required[...]` — and yields each (shape, field) it meets, the
shape named as the SDK names it with a leading `Beta` dropped. The caller decides where the walk
stops: a shape its table classifies whole, or a field it ignores or refuses, holds nothing further
that needs classifying.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

import typing_extensions


def shape_name(typed_dict: type) -> str:
    return typed_dict.__name__.removeprefix("Beta")


def sdk_fields(
    root: Any, *, descend_shape: Callable[[str], bool], descend_field: Callable[[str, str], bool]
) -> Iterator[tuple[str, str]]:
    """Every (shape, field) reachable from `root`; `type` tags (a Literal) are left out. The walk goes
    into a shape only where `descend_shape(shape)` and through a field only where `descend_field(shape, field)`."""
    seen: set[str] = set()
    pending: list[Any] = [root]
    while pending:
        for typed_dict in _typed_dicts(pending.pop()):
            name = shape_name(typed_dict)
            key = f"{typed_dict.__module__}.{typed_dict.__qualname__}"
            if key in seen:
                continue
            seen.add(key)
            if not descend_shape(name):
                yield name, ""
                continue
            for field, field_type in typing.get_type_hints(typed_dict, include_extras=True).items():
                if field == "type" and _is_literal(field_type):
                    continue
                yield name, field
                if descend_field(name, field):
                    pending.append(field_type)


def _typed_dicts(annotation: Any) -> Iterator[type]:
    """The TypedDicts an annotation may hold, at any depth of unions, containers and qualifiers."""
    pending = [annotation]
    while pending:
        current = pending.pop()
        if isinstance(current, type) and typing_extensions.is_typeddict(current):
            yield current
            continue
        origin = typing.get_origin(current)
        if origin is typing.Literal or origin is None:
            continue
        pending.extend(argument for argument in typing.get_args(current) if not isinstance(argument, (str, int)))
        if origin in (typing.Union, types.UnionType):
            continue


def _is_literal(annotation: Any) -> bool:
    while typing.get_origin(annotation) in (
        typing_extensions.Required,
        typing_extensions.NotRequired,
        typing.Annotated,
    ):
        annotation = typing.get_args(annotation)[0]
    return typing.get_origin(annotation) is typing.Literal
