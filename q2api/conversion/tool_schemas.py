"""Tool schemas whose root is not an object, made into ones Amazon Q accepts.

The Kiro backend checks the root of every `inputSchema.json`: "…inputSchema.json.type must be one
of the following: object" (kirodotdev/Kiro#10270, #11027). Clients send other roots — an empty
schema `{}` (MCP tools without parameters), a schema with `properties` but no `type`, a type list
`["object", "null"]`, or a root that is not an object at all (`{"type": "array", …}`). Each is
sent with an object root:

- no `type` (an empty schema, or one describing an object without saying so), or a type list
  that holds `object`: the root gets `"type": "object"` (and `properties: {}` when it has none);
- any other root: it is **wrapped** — the object root has one required property, `value`, whose
  schema is the original one. The model's tool call then carries its input under `value`
  (`{"value": [...]}`), which is what the client receives: an Anthropic tool input is an object.
  `$schema`, `$defs` and `definitions` stay at the root, where `$ref`s point.

Pure: `object_root_schema` returns the schema to send and what was changed (None: nothing).
"""

from __future__ import annotations

from typing import Any

WRAPPED_PROPERTY = "value"
# Keywords that only make sense at the root of a schema document: they stay there when it is wrapped.
_ROOT_KEYWORDS = ("$schema", "$id", "$defs", "definitions")
# Keywords that describe an object: a root that has one of them and no `type` is an object.
_OBJECT_KEYWORDS = frozenset(
    {"properties", "required", "additionalProperties", "patternProperties", "propertyNames", "minProperties"}
)
# Keywords that say nothing about the instance's type (annotations, and the root-only ones above).
_NEUTRAL_KEYWORDS = frozenset({"title", "description", "examples", "default", "$comment", *_ROOT_KEYWORDS})


def object_root_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The schema with an object root, and a description of the change (None when it had one)."""
    root_type = schema.get("type")
    if root_type == "object":
        return schema, None
    if root_type is None and set(schema) <= _NEUTRAL_KEYWORDS | _OBJECT_KEYWORDS:
        fixed = {"type": "object", **schema}
        fixed.setdefault("properties", {})
        what = "an empty schema" if set(schema) <= _NEUTRAL_KEYWORDS else "a schema without a type"
        return fixed, f'{what}: sent with "type": "object"'
    if isinstance(root_type, list) and "object" in root_type:
        fixed = {**schema, "type": "object"}
        fixed.setdefault("properties", {})
        return fixed, f'the type list {root_type!r} at the root: sent as "type": "object"'
    root = {key: schema[key] for key in _ROOT_KEYWORDS if key in schema}
    inner = {key: value for key, value in schema.items() if key not in _ROOT_KEYWORDS}
    wrapped = {
        **root,
        "type": "object",
        "properties": {WRAPPED_PROPERTY: inner},
        "required": [WRAPPED_PROPERTY],
    }
    described = f"type {root_type!r}" if root_type is not None else "a root that is not an object"
    return wrapped, (
        f"{described} at the root: wrapped as the required property {WRAPPED_PROPERTY!r} of an object; "
        f'the tool\'s input arrives as {{"{WRAPPED_PROPERTY}": …}}'
    )
