"""Fields a request carries that no request type declares: found, named and taken out.

The request types forbid unknown fields, so the decoder stops at the first one instead of
dropping it unseen. That is the rare path (a client newer than the gateway): the body is read
again as plain JSON, `strip_unknown_fields` walks it along the types' own description
(`msgspec.inspect`), removes every key no struct declares and returns their paths
(`messages.3.content.0.caller`), and the plain value is converted to the types. The door
reports the paths; nothing is dropped without a word.

Where the types cannot say what an object is (a union whose members a value does not pick,
free-form JSON), the walk leaves the value alone: the conversion that follows judges it.
"""

from __future__ import annotations

from typing import Any

from msgspec import inspect


def strip_unknown_fields(document: Any, request_type: type) -> list[str]:
    """Remove from `document` (plain JSON values, changed in place) every object key `request_type`
    does not declare where it stands; the removed keys' paths, in document order."""
    removed: list[str] = []
    _walk(document, inspect.type_info(request_type), "", removed)
    return removed


def _walk(value: Any, info: inspect.Type, path: str, removed: list[str]) -> None:
    if isinstance(info, inspect.StructType):
        if isinstance(value, dict):
            _walk_struct(value, info, path, removed)
    elif isinstance(info, (inspect.ListType, inspect.VarTupleType, inspect.SetType, inspect.FrozenSetType)):
        if isinstance(value, list):
            for index, item in enumerate(value):
                _walk(item, info.item_type, _join(path, str(index)), removed)
    elif isinstance(info, inspect.DictType):
        if isinstance(value, dict):
            for key, item in value.items():
                _walk(item, info.value_type, _join(path, str(key)), removed)
    elif isinstance(info, inspect.UnionType):
        member = _member_for(value, info)
        if member is not None:
            _walk(value, member, path, removed)


def _walk_struct(value: dict[str, Any], info: inspect.StructType, path: str, removed: list[str]) -> None:
    fields = {field.encode_name: field for field in info.fields}
    for key in list(value):
        if key == info.tag_field:
            continue
        field = fields.get(key)
        if field is None:
            del value[key]
            removed.append(_join(path, key))
        else:
            _walk(value[key], field.type, _join(path, key), removed)


def _member_for(value: Any, union: inspect.UnionType) -> inspect.Type | None:
    """The member of `union` that `value` would be decoded as, where that is plain from its JSON kind
    (an object: the struct its tag names, or the one struct; an array: the one array type)."""
    if isinstance(value, dict):
        structs = [member for member in union.types if isinstance(member, inspect.StructType)]
        tagged = [member for member in structs if member.tag_field is not None]
        if tagged:
            tag = value.get(tagged[0].tag_field)
            return next((member for member in tagged if member.tag == tag), None)
        if len(structs) == 1:
            return structs[0]
        dicts = [member for member in union.types if isinstance(member, inspect.DictType)]
        return dicts[0] if len(dicts) == 1 else None
    if isinstance(value, list):
        arrays = [member for member in union.types if isinstance(member, (inspect.ListType, inspect.VarTupleType))]
        return arrays[0] if len(arrays) == 1 else None
    return None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
