from __future__ import annotations

import struct
import uuid
import zlib
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from q2api.amazonq.eventstream import (
    MAX_HEADERS_LENGTH,
    MAX_PAYLOAD_LENGTH,
    ChecksumMismatch,
    EventStreamDecoder,
    EventStreamError,
    Frame,
    Int8,
    Int16,
    Int32,
    Int64,
    InvalidHeader,
    InvalidPrelude,
    MessageChecksumMismatch,
    PreludeChecksumMismatch,
    Timestamp,
    TruncatedStream,
    encode_error,
    encode_event,
    encode_exception,
    encode_frame,
)

# AWS CRT test vectors (docs/protocol.md#event-stream-framing).
VECTOR_NO_HEADERS = bytes.fromhex("0000001D00000000FD528C5A") + b"{'foo':'bar'}" + bytes.fromhex("C3653936")
VECTOR_ONE_HEADER = (
    bytes.fromhex("0000003D0000002007FD8396")
    + b"\x0ccontent-type\x07\x00\x10application/json"
    + b"{'foo':'bar'}"
    + bytes.fromhex("8D9C08B1")
)

ALL_TYPES_HEADERS = {
    "true": True,
    "false": False,
    "byte": Int8(-128),
    "short": Int16(32767),
    "int": -(2**31),
    "long": Int64(2**63 - 1),
    "bytes": b"\x00\xff\x80",
    "string": "héllo ✓",
    "timestamp": datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
}


def decode_all(data: bytes) -> list[Frame]:
    decoder = EventStreamDecoder()
    frames = decoder.feed(data)
    decoder.close()
    return frames


def raw_frame(header_bytes: bytes, payload: bytes = b"", *, total: int | None = None) -> bytes:
    """A frame with hand-made header bytes (and optionally a lying total length), valid CRCs."""
    length = 16 + len(header_bytes) + len(payload) if total is None else total
    prelude = struct.pack(">II", length, len(header_bytes))
    body = prelude + struct.pack(">I", zlib.crc32(prelude)) + header_bytes + payload
    return body + struct.pack(">I", zlib.crc32(body))


def prelude_only(total: int, headers_length: int) -> bytes:
    prelude = struct.pack(">II", total, headers_length)
    return prelude + struct.pack(">I", zlib.crc32(prelude))


# --------------------------------------------------------------------------- vectors


def test_crt_vector_without_headers_decodes() -> None:
    assert decode_all(VECTOR_NO_HEADERS) == [Frame({}, b"{'foo':'bar'}")]


def test_crt_vector_with_one_header_decodes() -> None:
    [frame] = decode_all(VECTOR_ONE_HEADER)
    assert frame.headers == {"content-type": "application/json"}
    assert frame.payload == b"{'foo':'bar'}"


def test_encoder_reproduces_crt_vectors_byte_for_byte() -> None:
    assert encode_frame({}, b"{'foo':'bar'}") == VECTOR_NO_HEADERS
    assert encode_frame({"content-type": "application/json"}, b"{'foo':'bar'}") == VECTOR_ONE_HEADER


# --------------------------------------------------------------------------- header types


def test_every_header_type_round_trips() -> None:
    [frame] = decode_all(encode_frame(ALL_TYPES_HEADERS, b"body"))
    assert frame.headers == ALL_TYPES_HEADERS
    assert frame.payload == b"body"
    assert type(frame.headers["true"]) is bool and type(frame.headers["false"]) is bool
    assert isinstance(frame.headers["uuid"], uuid.UUID)
    assert frame.headers["timestamp"].tzinfo is not None


@pytest.mark.parametrize(
    ("value", "type_code", "value_bytes"),
    [
        (True, 0, b""),
        (False, 1, b""),
        (Int8(-2), 2, b"\xfe"),
        (Int16(-2), 3, b"\xff\xfe"),
        (7, 4, b"\x00\x00\x00\x07"),
        (Int32(7), 4, b"\x00\x00\x00\x07"),
        (2**40, 5, struct.pack(">q", 2**40)),
        (Int64(7), 5, struct.pack(">q", 7)),
        (b"ab", 6, b"\x00\x02ab"),
        ("ab", 7, b"\x00\x02ab"),
        (Timestamp(1_700_000_000_123), 8, struct.pack(">q", 1_700_000_000_123)),
        (datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), 8, struct.pack(">q", 1000)),
        (uuid.UUID(int=1), 9, (1).to_bytes(16, "big")),
    ],
)
def test_encoder_picks_wire_type_from_python_type(value: object, type_code: int, value_bytes: bytes) -> None:
    frame = encode_frame({"h": value}, b"")  # type: ignore[dict-item]
    assert frame[12:-4] == b"\x01h" + bytes([type_code]) + value_bytes


def test_timestamp_decodes_to_utc_datetime_with_millisecond_precision() -> None:
    [frame] = decode_all(encode_frame({"t": Timestamp(-1)}, b""))
    assert frame.headers["t"] == datetime(1970, 1, 1, tzinfo=UTC) - timedelta(milliseconds=1)


def test_naive_datetime_is_encoded_as_utc() -> None:
    [frame] = decode_all(encode_frame({"t": datetime(2020, 1, 1)}, b""))
    assert frame.headers["t"] == datetime(2020, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "headers",
    [{"h": Int8(128)}, {"h": Int16(-32769)}, {"h": Int32(2**31)}, {"h": 2**63}, {"x" * 256: 1}, {"h": "x" * 65536}],
)
def test_encoder_rejects_values_the_wire_cannot_hold(headers: dict) -> None:
    with pytest.raises(ValueError):
        encode_frame(headers, b"")


def test_encoder_rejects_unknown_python_types() -> None:
    with pytest.raises(TypeError):
        encode_frame({"h": 1.5}, b"")  # type: ignore[dict-item]


# --------------------------------------------------------------------------- helpers and properties


def test_encode_event_builds_a_json_event_frame() -> None:
    [frame] = decode_all(encode_event("assistantResponseEvent", {"content": "Hi"}))
    assert frame.message_type == "event"
    assert frame.event_type == "assistantResponseEvent"
    assert frame.content_type == "application/json"
    assert frame.exception_type is None
    assert orjson.loads(frame.payload) == {"content": "Hi"}


def test_encode_event_accepts_raw_bytes_payload() -> None:
    [frame] = decode_all(encode_event("dryRunSucceedEvent", b""))
    assert frame.event_type == "dryRunSucceedEvent" and frame.payload == b""


def test_encode_exception_builds_an_exception_frame() -> None:
    [frame] = decode_all(encode_exception("error", {"message": "boom", "reason": "MODEL_TEMPORARILY_UNAVAILABLE"}))
    assert frame.message_type == "exception"
    assert frame.exception_type == "error"
    assert frame.event_type is None
    assert orjson.loads(frame.payload)["reason"] == "MODEL_TEMPORARILY_UNAVAILABLE"


def test_encode_error_puts_code_and_message_in_headers() -> None:
    [frame] = decode_all(encode_error("ThrottlingException", "slow down"))
    assert frame.message_type == "error"
    assert frame.error_code == "ThrottlingException"
    assert frame.error_message == "slow down"
    assert frame.payload == b""


def test_frames_are_frozen() -> None:
    [frame] = decode_all(VECTOR_NO_HEADERS)
    with pytest.raises(AttributeError):
        frame.payload = b""  # type: ignore[misc]


def test_frames_with_identical_headers_do_not_share_the_dict() -> None:
    first, second = decode_all(encode_event("e", {"n": 1}) + encode_event("e", {"n": 2}))
    first.headers["mutated"] = True
    assert "mutated" not in second.headers
    assert "mutated" not in decode_all(encode_event("e", {}))[0].headers


# --------------------------------------------------------------------------- incremental feeding


def test_one_byte_at_a_time() -> None:
    pieces = [encode_frame(ALL_TYPES_HEADERS, b"x" * 100), VECTOR_ONE_HEADER, VECTOR_NO_HEADERS]
    stream = b"".join(pieces)
    decoder = EventStreamDecoder()
    frames: list[Frame] = []
    for i in range(len(stream)):
        frames += decoder.feed(stream[i : i + 1])
        assert decoder.buffered == (i + 1) - sum(len(piece) for piece in pieces[: len(frames)])
    decoder.close()
    assert [f.payload for f in frames] == [b"x" * 100, b"{'foo':'bar'}", b"{'foo':'bar'}"]
    assert frames[0].headers == ALL_TYPES_HEADERS


def test_frames_spanning_chunks() -> None:
    stream = b"".join(encode_event("assistantResponseEvent", {"content": str(i)}) for i in range(10))
    decoder = EventStreamDecoder()
    cut_a, cut_b = len(stream) // 3 + 5, 2 * len(stream) // 3 + 1
    frames = decoder.feed(stream[:cut_a])
    assert decoder.buffered > 0
    frames += decoder.feed(stream[cut_a:cut_b])
    frames += decoder.feed(stream[cut_b:])
    assert decoder.buffered == 0
    decoder.close()
    assert [orjson.loads(f.payload)["content"] for f in frames] == [str(i) for i in range(10)]


def test_accepts_bytearray_and_memoryview_chunks() -> None:
    decoder = EventStreamDecoder()
    frames = decoder.feed(bytearray(VECTOR_ONE_HEADER[:20]))
    frames += decoder.feed(memoryview(VECTOR_ONE_HEADER)[20:])
    frames += decoder.feed(memoryview(VECTOR_NO_HEADERS))
    assert [type(f.payload) for f in frames] == [bytes, bytes]
    assert frames[1] == Frame({}, b"{'foo':'bar'}")


def test_large_frame_fed_in_small_chunks() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    stream = encode_frame({"k": "v"}, payload)
    decoder = EventStreamDecoder()
    frames: list[Frame] = []
    for start in range(0, len(stream), 1000):
        frames += decoder.feed(stream[start : start + 1000])
    decoder.close()
    assert len(frames) == 1 and frames[0].payload == payload


def test_empty_feed_and_clean_close() -> None:
    decoder = EventStreamDecoder()
    assert decoder.feed(b"") == []
    decoder.close()


# --------------------------------------------------------------------------- faults


def corrupt(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def expect_fault(data: bytes, fault: type[EventStreamError]) -> EventStreamDecoder:
    decoder = EventStreamDecoder()
    with pytest.raises(fault):
        decoder.feed(data)
        decoder.close()
    return decoder


def test_corrupt_prelude_crc() -> None:
    expect_fault(corrupt(VECTOR_ONE_HEADER, 9), PreludeChecksumMismatch)


def test_corrupt_length_is_caught_by_the_prelude_crc() -> None:
    expect_fault(corrupt(VECTOR_ONE_HEADER, 3), PreludeChecksumMismatch)


@pytest.mark.parametrize("index", [12, 30, len(VECTOR_ONE_HEADER) - 10, len(VECTOR_ONE_HEADER) - 1])
def test_corrupt_message_crc(index: int) -> None:
    expect_fault(corrupt(VECTOR_ONE_HEADER, index), MessageChecksumMismatch)


def test_checksum_faults_share_a_parent() -> None:
    assert issubclass(PreludeChecksumMismatch, ChecksumMismatch)
    assert issubclass(MessageChecksumMismatch, ChecksumMismatch)


@pytest.mark.parametrize(
    ("total", "headers_length"),
    [
        (0, 0),  # shorter than the minimum frame
        (15, 0),
        (20, 8),  # header section longer than the frame allows
        (16 + MAX_HEADERS_LENGTH + 1, MAX_HEADERS_LENGTH + 1),
        (16 + MAX_PAYLOAD_LENGTH + 1, 0),
        (0xFFFFFFFF, 0),
        (0xFFFFFFFF, 0xFFFFFFFF),
    ],
)
def test_absurd_lengths_fail_as_soon_as_the_prelude_arrives(total: int, headers_length: int) -> None:
    expect_fault(prelude_only(total, headers_length), InvalidPrelude)


def test_limits_themselves_are_accepted() -> None:
    decoder = EventStreamDecoder()
    assert decoder.feed(prelude_only(16 + MAX_PAYLOAD_LENGTH, 0)) == []  # waits for the body
    assert decoder.buffered == 12
    big_header = b"\x01h\x06\xff\xff" + b"a" * 0xFFFF
    frame = raw_frame(big_header)
    assert decode_all(frame)[0].headers == {"h": b"a" * 0xFFFF}


@pytest.mark.parametrize(
    ("header_bytes", "why"),
    [
        (b"\x01h\x0a", "unknown type code"),
        (b"\x01h\xff", "unknown type code"),
        (b"\x05ab", "name overruns the section"),
        (b"\x01h", "missing type"),
        (b"\x01h\x07\x00", "truncated string length"),
        (b"\x01h\x07\x00\x05abc", "string overruns the section"),
        (b"\x01h\x06\x00\x05abc", "byte array overruns the section"),
        (b"\x01h\x04\x00\x00", "truncated int32"),
        (b"\x01h\x05\x00\x00\x00\x00", "truncated int64"),
        (b"\x01h\x09" + b"\x00" * 15, "truncated uuid"),
        (b"\x01\xff\x00", "invalid UTF-8 name"),
        (b"\x01h\x07\x00\x02\xc3\x28", "invalid UTF-8 string"),
        (b"\x01h\x00\x01h\x01", "duplicate"),
        (b"\x01h\x08" + struct.pack(">q", 2**62), "timestamp beyond datetime"),
    ],
)
def test_invalid_headers(header_bytes: bytes, why: str) -> None:
    decoder = expect_fault(raw_frame(header_bytes, b"payload"), InvalidHeader)
    assert decoder.fault is not None


def test_invalid_header_message_names_the_fault() -> None:
    decoder = EventStreamDecoder()
    with pytest.raises(InvalidHeader, match="duplicate header 'h'"):
        decoder.feed(raw_frame(b"\x01h\x00\x01h\x01"))


def test_close_mid_frame_is_a_truncated_stream() -> None:
    decoder = EventStreamDecoder()
    assert decoder.feed(VECTOR_ONE_HEADER[:-1]) == []
    with pytest.raises(TruncatedStream):
        decoder.close()


def test_close_mid_prelude_is_a_truncated_stream() -> None:
    decoder = EventStreamDecoder()
    decoder.feed(VECTOR_NO_HEADERS + VECTOR_ONE_HEADER[:5])
    with pytest.raises(TruncatedStream):
        decoder.close()


@pytest.mark.parametrize(
    "bad",
    [
        corrupt(VECTOR_ONE_HEADER, 9),
        corrupt(VECTOR_ONE_HEADER, 40),
        prelude_only(0xFFFFFFFF, 0),
        raw_frame(b"\x01h\x0a"),
    ],
)
def test_poisoned_decoder_keeps_raising_the_same_fault(bad: bytes) -> None:
    decoder = EventStreamDecoder()
    with pytest.raises(EventStreamError) as first:
        decoder.feed(VECTOR_NO_HEADERS + bad)
    assert first.value.frames == (Frame({}, b"{'foo':'bar'}"),)  # what came before the fault
    for _ in range(3):
        with pytest.raises(type(first.value)) as again:
            decoder.feed(VECTOR_NO_HEADERS)  # even perfectly good bytes
        assert str(again.value) == str(first.value)
        assert again.value.frames == ()
    with pytest.raises(type(first.value)):
        decoder.close()


def test_poisoned_after_truncation() -> None:
    decoder = EventStreamDecoder()
    decoder.feed(VECTOR_NO_HEADERS[:3])
    with pytest.raises(TruncatedStream):
        decoder.close()
    with pytest.raises(TruncatedStream):
        decoder.feed(VECTOR_NO_HEADERS)


def test_fault_in_a_later_chunk_is_detected() -> None:
    decoder = EventStreamDecoder()
    bad = corrupt(VECTOR_ONE_HEADER, 50)
    assert decoder.feed(bad[:30]) == []
    with pytest.raises(MessageChecksumMismatch):
        decoder.feed(bad[30:])


def test_faults_are_value_errors_and_never_raw_parser_errors() -> None:
    assert issubclass(EventStreamError, ValueError)
    for fault in (InvalidPrelude, ChecksumMismatch, InvalidHeader, TruncatedStream):
        assert issubclass(fault, EventStreamError)


def test_many_distinct_header_sections_decode_correctly() -> None:
    # Per-frame header values (ids) defeat the header memo; it must stay correct past its cap.
    ids = [uuid.UUID(int=n) for n in range(600)]
    stream = b"".join(encode_frame({":message-type": "event", "id": id_}, b"") for id_ in ids * 2)
    assert [frame.headers["id"] for frame in decode_all(stream)] == ids * 2
