"""Frame encoders, used by the simulated upstream, the tests and the benchmarks."""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache

import orjson

from .frame import EPOCH, FIXED_WIDTH, MIN_FRAME_LENGTH, ONE_MILLISECOND, UINT16, UINT32, HeaderValue

_LENGTHS = struct.Struct(">II")
_BINARY = (bytes, bytearray, memoryview)


class Int8(int):
    """Header value encoded as wire type 2 (byte)."""


class Int16(int):
    """Header value encoded as wire type 3 (short)."""


class Int32(int):
    """Header value encoded as wire type 4 (integer); plain ints use it when they fit."""


class Int64(int):
    """Header value encoded as wire type 5 (long)."""


class Timestamp(int):
    """Raw milliseconds since the epoch, encoded as wire type 8 (decodes to a datetime)."""


_INT_WIRE_TYPES: dict[type, int] = {Int8: 2, Int16: 3, Int32: 4, Int64: 5, Timestamp: 8}
_INT32_RANGE = range(-(2**31), 2**31)


def _encode_header_value(name: str, value: object) -> bytes:
    if value is True:
        return b"\x00"
    if value is False:
        return b"\x01"
    if isinstance(value, str):
        return b"\x07" + _length_prefixed(value.encode("utf-8"), name)
    if isinstance(value, _BINARY):
        return b"\x06" + _length_prefixed(bytes(value), name)
    if isinstance(value, int):
        type_code = _INT_WIRE_TYPES.get(type(value))
        if type_code is None:
            # Plain ints take the narrowest of int32/int64 that holds them.
            type_code = 4 if value in _INT32_RANGE else 5
        try:
            return bytes((type_code,)) + FIXED_WIDTH[type_code].pack(value)
        except struct.error:
            raise ValueError(f"header {name!r}: {value} does not fit wire type {type_code}") from None
    if isinstance(value, datetime):
        if value.tzinfo is None:  # naive datetimes are taken as UTC
            value = value.replace(tzinfo=UTC)
        return b"\x08" + FIXED_WIDTH[8].pack((value - EPOCH) // ONE_MILLISECOND)
    if isinstance(value, uuid.UUID):
        return b"\x09" + value.bytes
    raise TypeError(f"header {name!r}: cannot encode a {type(value).__name__}")


def _length_prefixed(raw: bytes, name: str) -> bytes:
    if len(raw) > 0xFFFF:
        raise ValueError(f"header {name!r}: value of {len(raw)} bytes exceeds 65535")
    return UINT16.pack(len(raw)) + raw


def encode_headers(headers: Mapping[str, HeaderValue]) -> bytes:
    parts = []
    for name, value in headers.items():
        raw_name = name.encode("utf-8")
        if len(raw_name) > 255:
            raise ValueError(f"header name of {len(raw_name)} bytes exceeds 255")
        parts.append(bytes((len(raw_name),)) + raw_name + _encode_header_value(name, value))
    return b"".join(parts)


def encode_frame(headers: Mapping[str, HeaderValue], payload: bytes | bytearray | memoryview) -> bytes:
    """One frame. Header wire types follow the Python types: bool -> 0/1, int -> int32 (int64 when
    it does not fit; Int8/Int16/Int32/Int64/Timestamp force a type), bytes -> 6, str -> 7,
    datetime -> 8 (naive taken as UTC), uuid.UUID -> 9."""
    return _frame(encode_headers(headers), payload)


def _frame(header_bytes: bytes, payload: bytes | bytearray | memoryview) -> bytes:
    prelude = _LENGTHS.pack(MIN_FRAME_LENGTH + len(header_bytes) + len(payload), len(header_bytes))
    body = b"".join((prelude, UINT32.pack(zlib.crc32(prelude)), header_bytes, payload))
    return body + UINT32.pack(zlib.crc32(body))


@lru_cache(maxsize=128)
def _event_header_bytes(event_type: str) -> bytes:
    return encode_headers({":event-type": event_type, ":content-type": "application/json", ":message-type": "event"})


def encode_event(event_type: str, payload: Mapping[str, object] | bytes) -> bytes:
    """An `:message-type: event` frame; a mapping payload is serialised with orjson."""
    return _frame(_event_header_bytes(event_type), _json_payload(payload))


def encode_exception(exception_type: str, payload: Mapping[str, object] | bytes) -> bytes:
    """An `:message-type: exception` frame (modelled in-stream error, JSON payload)."""
    headers = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return encode_frame(headers, _json_payload(payload))


def _json_payload(payload: Mapping[str, object] | bytes) -> bytes:
    return bytes(payload) if isinstance(payload, _BINARY) else orjson.dumps(payload)


def encode_error(code: str, message: str) -> bytes:
    """An `:message-type: error` frame: unmodelled error, code and message in headers, no payload."""
    return encode_frame({":error-code": code, ":error-message": message, ":message-type": "error"}, b"")
