"""Incremental, CRC-checked decoder: raw body chunks in, whole frames out."""

from __future__ import annotations

import uuid
import zlib
from datetime import datetime, timedelta

from .errors import (
    EventStreamError,
    InvalidHeader,
    InvalidPrelude,
    MessageChecksumMismatch,
    PreludeChecksumMismatch,
    TruncatedStream,
)
from .frame import (
    EPOCH,
    FIXED_WIDTH,
    MAX_HEADERS_LENGTH,
    MAX_PAYLOAD_LENGTH,
    MIN_FRAME_LENGTH,
    PRELUDE,
    PRELUDE_LENGTH,
    UINT16,
    UINT32,
    Frame,
    HeaderValue,
)

_unpack_prelude = PRELUDE.unpack_from
_unpack_uint32 = UINT32.unpack_from
_crc32 = zlib.crc32
# Parsed header sections, by their bytes: distinct ones in one stream are few (one per event
# type), and parsing a text frame's three headers again costs ~6 µs, a fifth of the gateway's
# CPU per relayed chunk (BENCHMARKS.md, "Optimisations"). Values that vary per frame (uuids,
# timestamps) would grow the memo without bound, so it is capped.
_HEADER_MEMO_LIMIT = 256


class EventStreamDecoder:
    """Incremental decoder: `feed(chunk) -> [Frame, ...]`, then `close()` at end of body."""

    __slots__ = ("_fault", "_header_memo", "_need", "_offset", "_pending")

    def __init__(self) -> None:
        self._pending = bytearray()  # bytes of an incomplete frame
        # Bytes `_pending` must hold before decoding is worth trying: a prelude, then the whole
        # frame it announces. Skipping attempts until then keeps large frames linear.
        self._need = PRELUDE_LENGTH
        self._offset = 0  # stream offset of `_pending[0]`, for error messages
        self._fault: EventStreamError | None = None
        self._header_memo: dict[bytes, dict[str, HeaderValue]] = {}

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._pending)

    @property
    def fault(self) -> EventStreamError | None:
        return self._fault

    def feed(self, data: bytes) -> list[Frame]:
        """Decode every whole frame completed by `data`; keep the rest for the next call."""
        # The hot path: one call per network read, often one frame per read, so no helper
        # calls and no attribute lookups in the loop (module-level callables are cheap globals).
        if self._fault is not None:
            raise self._poisoned()
        pending = self._pending
        if pending:
            pending += data
            if len(pending) < self._need:
                return []
            data = bytes(pending)
            pending.clear()
        elif type(data) is not bytes:
            data = bytes(data)
        frames: list[Frame] = []
        memo = self._header_memo
        end = len(data)
        pos = 0
        while end - pos >= PRELUDE_LENGTH:
            total, headers_length, prelude_crc = _unpack_prelude(data, pos)
            if _crc32(data[pos : pos + 8]) != prelude_crc:
                raise self._fail(self._prelude_checksum_mismatch(data, pos), frames)
            payload_length = total - headers_length - 16
            if headers_length > MAX_HEADERS_LENGTH or not 0 <= payload_length <= MAX_PAYLOAD_LENGTH:
                raise self._fail(self._invalid_prelude(pos, total, headers_length), frames)
            frame_end = pos + total
            if frame_end > end:
                self._need = total
                pending += memoryview(data)[pos:]
                self._offset += pos
                return frames
            calculated = _crc32(data[pos + 8 : frame_end - 4], prelude_crc)
            expected = _unpack_uint32(data, frame_end - 4)[0]
            if calculated != expected:
                raise self._fail(MessageChecksumMismatch(expected, calculated, self._offset + pos), frames)
            headers_end = pos + PRELUDE_LENGTH + headers_length
            header_bytes = data[pos + PRELUDE_LENGTH : headers_end]
            headers = memo.get(header_bytes)
            if headers is None:
                headers = self._parse_and_memoise(header_bytes, pos, frames)
            # Copy: the memoised dict is shared between frames, a consumer may mutate its own.
            frames.append(Frame(headers.copy(), data[headers_end : frame_end - 4]))
            pos = frame_end
        if pos < end:
            pending += memoryview(data)[pos:]
        self._need = PRELUDE_LENGTH
        self._offset += pos
        return frames

    def close(self) -> None:
        if self._fault is not None:
            raise self._poisoned()
        if self._pending:
            fault = TruncatedStream(
                f"stream ended inside a frame at offset {self._offset}: "
                f"{len(self._pending)} of {self._need} bytes received"
            )
            self._fault = fault
            raise fault

    def _poisoned(self) -> EventStreamError:
        fault = self._fault
        assert fault is not None
        fault.frames = ()
        return fault

    def _fail(self, fault: EventStreamError, frames: list[Frame]) -> EventStreamError:
        fault.frames = tuple(frames)
        self._fault = fault
        return fault

    def _parse_and_memoise(self, header_bytes: bytes, pos: int, frames: list[Frame]) -> dict[str, HeaderValue]:
        try:
            headers = _parse_headers(header_bytes)
        except InvalidHeader as fault:
            raise self._fail(InvalidHeader(f"{fault} (frame at offset {self._offset + pos})"), frames) from None
        memo = self._header_memo
        if len(memo) >= _HEADER_MEMO_LIMIT:
            memo.clear()
        memo[header_bytes] = headers
        return headers

    def _prelude_checksum_mismatch(self, data: bytes, pos: int) -> PreludeChecksumMismatch:
        calculated = _crc32(data[pos : pos + 8])
        expected = _unpack_uint32(data, pos + 8)[0]
        return PreludeChecksumMismatch(expected, calculated, self._offset + pos)

    def _invalid_prelude(self, pos: int, total: int, headers_length: int) -> InvalidPrelude:
        where = f"frame at offset {self._offset + pos}"
        if headers_length > MAX_HEADERS_LENGTH:
            problem = f"headers length {headers_length} exceeds {MAX_HEADERS_LENGTH}"
        elif total < MIN_FRAME_LENGTH + headers_length:
            problem = f"total length {total} is too small for {headers_length} header bytes"
        else:
            problem = f"payload length {total - MIN_FRAME_LENGTH - headers_length} exceeds {MAX_PAYLOAD_LENGTH}"
        return InvalidPrelude(f"{problem} ({where})")


def _parse_headers(data: bytes) -> dict[str, HeaderValue]:
    headers: dict[str, HeaderValue] = {}
    end = len(data)
    pos = 0
    while pos < end:
        name_length = data[pos]
        pos += 1
        name = _utf8(_take(data, pos, name_length, "header name"), "header name")
        pos += name_length
        if name in headers:
            raise InvalidHeader(f"duplicate header {name!r}")
        if pos >= end:
            raise InvalidHeader(f"header {name!r} is truncated before its type")
        type_code = data[pos]
        pos += 1
        value: HeaderValue
        if type_code == 7:  # string: by far the most common, checked first
            length = _length_prefix(data, pos, name)
            value = _utf8(_take(data, pos + 2, length, f"header {name!r}"), f"header {name!r}")
            pos += 2 + length
        elif type_code == 0:
            value = True
        elif type_code == 1:
            value = False
        elif 2 <= type_code <= 5 or type_code == 8:
            unpacker = FIXED_WIDTH[type_code]
            raw = _take(data, pos, unpacker.size, f"header {name!r}")
            number: int = unpacker.unpack(raw)[0]
            pos += unpacker.size
            value = _timestamp(number, name) if type_code == 8 else number
        elif type_code == 6:
            length = _length_prefix(data, pos, name)
            value = _take(data, pos + 2, length, f"header {name!r}")
            pos += 2 + length
        elif type_code == 9:
            value = uuid.UUID(bytes=_take(data, pos, 16, f"header {name!r}"))
            pos += 16
        else:
            raise InvalidHeader(f"header {name!r} has unknown type code {type_code}")
        headers[name] = value
    return headers


def _take(data: bytes, pos: int, length: int, what: str) -> bytes:
    if pos + length > len(data):
        raise InvalidHeader(f"{what} is truncated: needs {length} bytes, {max(len(data) - pos, 0)} left")
    return data[pos : pos + length]


def _length_prefix(data: bytes, pos: int, name: str) -> int:
    length: int = UINT16.unpack(_take(data, pos, 2, f"length of header {name!r}"))[0]
    return length


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidHeader(f"{what} is not valid UTF-8 ({error.reason} at byte {error.start})") from None


def _timestamp(milliseconds: int, name: str) -> datetime:
    try:
        return EPOCH + timedelta(milliseconds=milliseconds)
    except OverflowError:
        raise InvalidHeader(f"header {name!r} timestamp {milliseconds} ms is outside the representable range") from None
