"""A JSON schema from a client, compiled so that checking a value against it costs only what the gateway chose.

    compiled = compile_client_schema(schema)   # at request time; raises SchemaRefused (the door's 400)
    compiled.mismatch(value)                   # on the reply: None, or what is wrong (bounded in time)

The schema is the client's, so nothing in it may make the gateway fetch, read a file, backtrack
or loop (docs/architecture.md, "Rules the code keeps"). `jsonschema` evaluates it, with these limits:

* no retrieval: the validator's registry retrieves nothing, so a `$ref` resolves only inside
  the schema. A reference that is not a fragment (`#/$defs/x`, `#name`) — `http://…`,
  `file://…`, a relative path — is refused at request time, as is one that resolves nowhere;
* no backtracking: `pattern`, `patternProperties` and the `additionalProperties` that depends on
  them match with RE2 (google-re2: linear time, bounded memory). A pattern RE2 cannot compile
  (look-around, back-references) is refused at request time; so is `unevaluatedProperties`
  next to `patternProperties` (jsonschema would match those with Python's `re`);
* no endless or runaway work: a `$ref` cycle that never steps into the value (`{"$ref": "#"}`)
  is refused at request time, and a check stops at its deadline (looked at before every
  keyword), which bounds schemas whose cost grows exponentially (`anyOf` of `anyOf`s);
* one draft throughout: the top-level `$schema` picks the draft, a nested `$schema` is refused
  (jsonschema would switch to its own validator class there, without the limits above).

`format` stays an annotation, as jsonschema's default: no format checker runs on the reply.
"""

from __future__ import annotations

import contextvars
import functools
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import re2
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError, best_match

from q2api.anthropic.reply_content import Undecided

# How long checking one reply may take: ample for any real schema and reply (a 100 KB reply
# against a schema of a few hundred keywords is checked in milliseconds).
CHECK_SECONDS = 2.0
# RE2's memory budget per pattern (its default is 8 MiB); a pattern that needs more is refused.
_PATTERN_MEMORY = 1 << 20
_MESSAGE_CHARS = 500  # a jsonschema message quotes the value: kept short in an error
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose subschemas apply to the same value: a cycle through them alone never ends.
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf", "extends")
_IN_PLACE_SCHEMAS = ("not", "if", "then", "else", "extends")
_IN_PLACE_MAPS = ("dependentSchemas", "dependencies")

# The deadline of the check running in this context (none outside a check).
_deadline: contextvars.ContextVar[float] = contextvars.ContextVar("client_schema_deadline", default=math.inf)

Keyword = Callable[[Any, Any, Any, dict[str, Any]], Iterable[ValidationError] | None]


class SchemaRefused(Exception):
    """The schema cannot be checked safely, or at all; the message says why (for the client)."""


class _OutOfTime(Exception):
    pass


class _UnsupportedPattern(Exception):
    def __init__(self, pattern: object) -> None:
        super().__init__(f"the pattern {pattern!r} cannot be matched")


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    _validator: Any  # a jsonschema validator of a class `_bounded_class` made

    def mismatch(self, value: Any, *, seconds: float | None = None) -> str | None:
        """Why `value` does not match the schema (where, and what), or None when it does; the check stops
        after `seconds` (default CHECK_SECONDS)."""
        seconds = CHECK_SECONDS if seconds is None else seconds
        token = _deadline.set(time.monotonic() + seconds)
        try:
            error = best_match(self._validator.iter_errors(value))
        except _OutOfTime:
            return Undecided(f"the reply could not be checked against the JSON schema within {seconds:g} s")
        except RecursionError:
            return Undecided("the reply nests too deeply to be checked against the JSON schema")
        except (referencing.exceptions.Unresolvable, _UnsupportedPattern) as exc:
            return Undecided(f"the reply could not be checked against the JSON schema: {_shortened(str(exc))}")
        finally:
            _deadline.reset(token)
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path) or "the top level"
        return f"the reply does not match the JSON schema at {where}: {_shortened(error.message)}"


def compile_client_schema(schema: dict[str, Any]) -> CompiledSchema:
    """The schema ready to check replies with; raises SchemaRefused naming what cannot be allowed."""
    stock = _draft_of(schema)
    # The draft is chosen: without `$schema`, no subschema (not even the root, reached again by
    # `$ref: "#"`) can make jsonschema switch to a validator class without these limits.
    root = {key: value for key, value in schema.items() if key != "$schema"}
    try:
        _check_patterns_and_dialects(root)
        stock.check_schema(root, format_checker=None)  # format: regex would compile patterns with Python's re
        validator = _bounded_class(stock)(root, registry=_NO_RETRIEVAL)
        _check_references(root, _specification(stock))
    except SchemaError as exc:
        raise SchemaRefused(f"not a valid JSON schema: {_shortened(exc.message)}") from None
    except RecursionError:
        raise SchemaRefused("nested too deeply to be checked") from None
    return CompiledSchema(validator)


def _draft_of(schema: dict[str, Any]) -> Any:
    declared = schema.get("$schema")
    if declared is None:
        return Draft202012Validator
    stock = validators.validator_for(schema, default=None) if isinstance(declared, str) else None
    if stock is None:
        raise SchemaRefused(
            f"$schema {_shortened(repr(declared))} names no JSON Schema draft q2api knows "
            "(draft-03, -04, -06, -07, 2019-09 or 2020-12); leave it out for 2020-12"
        )
    return stock


# -- request time: what is refused ----------------------------------------------------------


def _check_patterns_and_dialects(root: dict[str, Any]) -> None:
    """Every object of the schema, schema or not (a `$ref` may point anywhere in it): each pattern
    must compile with RE2, and no `$schema` may hide below the top."""
    unevaluated = pattern_properties = False
    for node in _objects(root):
        if "$schema" in node:
            raise SchemaRefused("$schema is only read at the top of the schema")
        if isinstance(pattern := node.get("pattern"), str):
            _compiled_or_refused(pattern)
        if isinstance(patterns := node.get("patternProperties"), dict):
            pattern_properties = True
            for pattern in patterns:
                _compiled_or_refused(pattern)
        unevaluated |= "unevaluatedProperties" in node
    if unevaluated and pattern_properties:
        raise SchemaRefused(
            "unevaluatedProperties together with patternProperties is not supported (their patterns would "
            "be matched by a backtracking regex engine); use additionalProperties"
        )


def _objects(root: dict[str, Any]) -> Iterator[dict[str, Any]]:
    pending: list[Any] = [root]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            yield value
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)


def _compiled_or_refused(pattern: str) -> None:
    try:
        _regex(pattern)
    except _UnsupportedPattern:
        raise SchemaRefused(
            f"the pattern {_shortened(repr(pattern))} is not supported: patterns are matched by RE2, which has "
            "no look-around or back-references (and a size limit)"
        ) from None


def _check_references(root: dict[str, Any], specification: Any) -> None:
    """Every reference a check could follow, followed now: it must stay inside the schema, resolve,
    and not lead back to where it started without stepping into the value."""
    resource = referencing.Resource.from_contents(root, default_specification=specification)
    pending = [(resource, _NO_RETRIEVAL.resolver_with_root(resource))]
    # id() of a schema object → (id() of a schema applied to the same value, the keyword or reference that applies it)
    in_place: dict[int, list[tuple[int, str]]] = {}
    while pending:
        resource, resolver = pending.pop()
        contents = resource.contents
        if not isinstance(contents, dict) or id(contents) in in_place:
            continue
        resolver = resolver.in_subresource(resource)
        edges = in_place[id(contents)] = []
        for keyword in _REFERENCES:
            reference = contents.get(keyword)
            if not isinstance(reference, str):
                continue
            target = _resolved(resolver, reference)
            edges.append((id(target.contents), f"{keyword} {reference!r}"))
            pending.append((_resource(target.contents, specification), target.resolver))
        edges += ((id(subschema), keyword) for keyword, subschema in _in_place_subschemas(contents))
        pending += ((subresource, resolver) for subresource in resource.subresources())
    cycle = _first_cycle(in_place)
    if cycle is not None:
        raise SchemaRefused(
            f"the schema applies itself to the same value without end (through {cycle}); a recursive schema "
            "must step into a property or an item before it refers back"
        )


def _resolved(resolver: Any, reference: str) -> Any:
    if not reference.startswith("#"):
        raise SchemaRefused(
            f"the reference {_shortened(repr(reference))} points outside the schema: q2api fetches and reads "
            "nothing, so only references inside it (#/$defs/name) resolve"
        )
    try:
        return resolver.lookup(reference)
    except referencing.exceptions.Unresolvable:
        raise SchemaRefused(f"the reference {_shortened(repr(reference))} resolves to nothing in the schema") from None


def _resource(contents: Any, specification: Any) -> Any:
    return referencing.Resource.from_contents(contents, default_specification=specification)


def _in_place_subschemas(schema: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    for keyword in _IN_PLACE_LISTS:
        if isinstance(subschemas := schema.get(keyword), list):
            yield from ((keyword, each) for each in subschemas if isinstance(each, dict))
    for keyword in _IN_PLACE_SCHEMAS:
        if isinstance(subschema := schema.get(keyword), dict):
            yield keyword, subschema
    for keyword in _IN_PLACE_MAPS:
        if isinstance(subschemas := schema.get(keyword), dict):
            yield from ((keyword, each) for each in subschemas.values() if isinstance(each, dict))


def _first_cycle(edges: dict[int, list[tuple[int, str]]]) -> str | None:
    """The keyword or reference closing a cycle of `edges`, if there is one (iterative depth-first search)."""
    finished: set[int] = set()
    for start in edges:
        if start in finished:
            continue
        on_path = {start}
        stack = [(start, iter(edges.get(start, ())))]
        while stack:
            node, successors = stack[-1]
            step = next(successors, None)
            if step is None:
                stack.pop()
                on_path.discard(node)
                finished.add(node)
                continue
            target, how = step
            if target in on_path:
                return how
            if target not in finished:
                on_path.add(target)
                stack.append((target, iter(edges.get(target, ()))))
    return None


# -- the validator: RE2 patterns, a deadline, no retrieval -----------------------------------


# A registry's default `retrieve` raises NoSuchResource for every URI: this one never fetches or reads
# anything (jsonschema's own default would, with urllib, on the event loop, without a timeout).
_NO_RETRIEVAL: referencing.Registry[Any] = referencing.Registry()


def _specification(stock: Any) -> Any:
    return referencing.jsonschema.specification_with(stock.ID_OF(stock.META_SCHEMA))


@functools.cache
def _bounded_class(stock: Any) -> Any:
    """`stock` (a jsonschema draft validator) with RE2 patterns, and every keyword behind the deadline."""
    regex_keywords: dict[str, Keyword] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    keywords = {**stock.VALIDATORS, **{name: kw for name, kw in regex_keywords.items() if name in stock.VALIDATORS}}
    return validators.extend(stock, {name: _before_deadline(keyword) for name, keyword in keywords.items()})


def _before_deadline(keyword: Keyword) -> Keyword:
    def bounded(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> Any:
        if time.monotonic() > _deadline.get():
            raise _OutOfTime
        return keyword(validator, value, instance, schema)

    return bounded


def _regex(pattern: object) -> Any:
    """The pattern compiled by RE2, or _UnsupportedPattern (also for a pattern that is not text)."""
    if not isinstance(pattern, str):
        raise _UnsupportedPattern(pattern)
    return _compiled(pattern)


# The same patterns are matched again for every value they apply to; a hostile client's patterns
# cost at most _PATTERN_MEMORY each, and only while they are among the last few used.
@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would write the client's pattern to stderr, raw
    options.max_mem = _PATTERN_MEMORY
    try:
        return re2.compile(pattern, options=options)
    except re2.error:
        raise _UnsupportedPattern(pattern) from None


def _pattern(validator: Any, pattern: Any, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = _regex(pattern)
        for name, value in instance.items():
            if regex.search(name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    regexes = [_regex(pattern) for pattern in schema.get("patternProperties", {})]
    extras = [name for name in instance if name not in named and not any(regex.search(name) for regex in regexes)]
    if validator.is_type(additional, "object"):
        for name in extras:
            yield from validator.descend(instance[name], additional, path=name)
    elif not additional and extras:
        listed = ", ".join(repr(name) for name in sorted(extras))
        if regexes:
            patterns = ", ".join(repr(pattern) for pattern in sorted(schema["patternProperties"]))
            yield ValidationError(
                f"{listed} {'does' if len(extras) == 1 else 'do'} not match any of the regexes: {patterns}"
            )
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


def _shortened(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"
