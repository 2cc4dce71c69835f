"""Remove what Amazon Q rejects from JSON documents (schemas, tool inputs): `null` values
anywhere and, in tool inputs, empty-string keys (docs/protocol.md#json-encoding-rules).

Most documents are already clean, so the check runs first on the msgspec encoding (C speed,
no copy); only a document that may need it is rebuilt. A token found inside a string is a
false alarm that costs one rebuild, never a wrong result.
"""

from __future__ import annotations

from typing import Any

import msgspec

_encode = msgspec.json.Encoder().encode


def _has_null_token(encoded: bytes) -> bool:
    return b":null" in encoded or b"[null" in encoded or b",null" in encoded


def may_hold_null(document: Any) -> bool:
    return _has_null_token(_encode(document))


def without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value if item is not None]
    return value


def _without_nulls_and_empty_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: _without_nulls_and_empty_keys(item) for key, item in value.items() if item is not None and key != ""
        }
    if isinstance(value, list):
        return [_without_nulls_and_empty_keys(item) for item in value if item is not None]
    return value


def cleaned_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The schema without nulls (`required: null`, `properties: null`, …) and whether it changed."""
    if not may_hold_null(schema):
        return schema, False
    cleaned = without_nulls(schema)
    return cleaned, cleaned != schema


_SCALAR_TYPES = frozenset({str, int, float, bool})


def cleaned_tool_input(document: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    # Most tool inputs are flat objects of scalars (`{"file_path": "..."}`): nothing to clean.
    if "" not in document and all(type(value) in _SCALAR_TYPES for value in document.values()):
        return document, False
    encoded = _encode(document)
    if not (_has_null_token(encoded) or b'{"":' in encoded or b',"":' in encoded):
        return document, False
    cleaned = _without_nulls_and_empty_keys(document)
    return cleaned, cleaned != document
