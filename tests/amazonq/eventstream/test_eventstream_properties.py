"""Property tests for the event-stream decoder, with botocore's EventStreamBuffer as the oracle."""

from __future__ import annotations

import contextlib
import itertools
import struct
import uuid
import zlib
from datetime import UTC, datetime, timedelta

from botocore.eventstream import EventStreamBuffer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from q2api.amazonq.eventstream import (
    EventStreamDecoder,
    EventStreamError,
    Frame,
    Int8,
    Int16,
    Int64,
    Timestamp,
    encode_frame,
)

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Milliseconds that datetime can represent (years 1..9999); the decoder returns datetimes.
_MIN_MS = (datetime(1, 1, 1, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).days * 86_400_000
_MAX_MS = (datetime(9999, 12, 31, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).days * 86_400_000

header_values = st.one_of(
    st.booleans(),
    st.integers(-(2**7), 2**7 - 1).map(Int8),
    st.integers(-(2**15), 2**15 - 1).map(Int16),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1).map(Int64),
    st.binary(max_size=40),
    st.text(max_size=40),
    st.integers(_MIN_MS, _MAX_MS).map(Timestamp),
    st.uuids(),
)
header_maps = st.dictionaries(st.text(max_size=12), header_values, max_size=6)
frames = st.tuples(header_maps, st.binary(max_size=200))
frame_lists = st.lists(frames, min_size=1, max_size=8)


def normalise(headers: dict) -> dict:
    """Our decoded values in botocore's representation (raw ms timestamps, raw uuid bytes)."""
    out = {}
    for name, value in headers.items():
        if isinstance(value, datetime):
            value = (value - EPOCH) // timedelta(milliseconds=1)
        elif isinstance(value, uuid.UUID):
            value = value.bytes
        out[name] = (type(value).__name__, value)
    return out


def expected_headers(headers: dict) -> dict:
    """What the encoder's input should decode to, in the normalised form."""
    out = {}
    for name, value in headers.items():
        if isinstance(value, Timestamp):
            value = int(value)
        elif isinstance(value, uuid.UUID):
            value = value.bytes
        elif isinstance(value, int) and not isinstance(value, bool):
            value = int(value)
        out[name] = (type(value).__name__, value)
    return out


def botocore_decode(data: bytes) -> list[tuple[dict, bytes]]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return [(dict(message.headers), message.payload) for message in buffer]


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def feed_all(chunks: list[bytes]) -> list[Frame]:
    decoder = EventStreamDecoder()
    decoded: list[Frame] = []
    for chunk in chunks:
        decoded += decoder.feed(chunk)
    decoder.close()
    return decoded


@PROPERTY_SETTINGS
@given(frame_lists, st.lists(st.integers(min_value=0), max_size=30))
def test_any_split_gives_the_same_frames(specs: list, cuts: list[int]) -> None:
    stream = b"".join(encode_frame(headers, payload) for headers, payload in specs)
    decoded = feed_all(split(stream, cuts))
    assert [(normalise(f.headers), f.payload) for f in decoded] == [
        (expected_headers(headers), payload) for headers, payload in specs
    ]
    assert decoded == feed_all([stream])


@PROPERTY_SETTINGS
@given(frame_lists)
def test_agrees_with_botocore(specs: list) -> None:
    stream = b"".join(encode_frame(headers, payload) for headers, payload in specs)
    ours = [(normalise(f.headers), f.payload) for f in feed_all([stream])]
    theirs = [
        ({name: (type(value).__name__, value) for name, value in headers.items()}, payload)
        for headers, payload in botocore_decode(stream)
    ]
    assert ours == theirs


def with_valid_crcs(header_bytes: bytes, payload: bytes) -> bytes:
    prelude = struct.pack(">II", 16 + len(header_bytes) + len(payload), len(header_bytes))
    body = prelude + struct.pack(">I", zlib.crc32(prelude)) + header_bytes + payload
    return body + struct.pack(">I", zlib.crc32(body))


def single_header(headers: dict) -> bytes:
    return encode_frame(headers, b"")[12:-4]


# Header sections built from valid headers interleaved with junk, so that both the success path
# (compared with botocore) and every fault path of the header parser are reached.
header_sections = st.lists(
    st.one_of(
        st.dictionaries(st.text(max_size=6), header_values, min_size=1, max_size=1).map(single_header),
        st.binary(min_size=1, max_size=4),
    ),
    max_size=5,
).map(b"".join)


@PROPERTY_SETTINGS
@given(st.one_of(header_sections, st.binary(max_size=60)), st.binary(max_size=20))
def test_arbitrary_header_sections_decode_like_botocore_or_fail_cleanly(header_bytes: bytes, payload: bytes) -> None:
    data = with_valid_crcs(header_bytes, payload)
    try:
        [frame] = feed_all([data])
    except EventStreamError:
        return  # botocore may accept some of these (it is lenient) or crash with a raw error
    [(headers, botocore_payload)] = botocore_decode(data)
    assert normalise(frame.headers) == {name: (type(v).__name__, v) for name, v in headers.items()}
    assert frame.payload == botocore_payload


mutations = st.one_of(
    st.tuples(st.just("flip"), st.integers(min_value=0), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(min_value=0), st.just(0)),
    st.tuples(st.just("insert"), st.integers(min_value=0), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.integers(min_value=0), st.just(0)),
)


def mutate(data: bytes, kind: str, where: int, value: int) -> bytes:
    index = where % len(data)
    if kind == "flip":
        return data[:index] + bytes([data[index] ^ value]) + data[index + 1 :]
    if kind == "truncate":
        return data[:index]
    if kind == "insert":
        return data[:index] + bytes([value]) + data[index:]
    return data[:index] + data[index + 1 :]


@PROPERTY_SETTINGS
@given(frame_lists, st.lists(mutations, min_size=1, max_size=3), st.lists(st.integers(min_value=0), max_size=10))
def test_corruption_only_raises_event_stream_errors(specs: list, changes: list, cuts: list[int]) -> None:
    stream = b"".join(encode_frame(headers, payload) for headers, payload in specs)
    for kind, where, value in changes:
        stream = mutate(stream, kind, where, value) or b"\x00"
    decoder = EventStreamDecoder()
    try:
        for chunk in split(stream, cuts):
            decoder.feed(chunk)
        decoder.close()
    except EventStreamError:
        # Poisoned: keeps failing with the same class of error, whatever comes next.
        try:
            decoder.feed(b"\x00" * 16)
        except EventStreamError:
            pass
        else:
            raise AssertionError("a faulted decoder accepted more input")


@PROPERTY_SETTINGS
@given(st.binary(max_size=300), st.lists(st.integers(min_value=0), max_size=10))
def test_random_bytes_only_raise_event_stream_errors(data: bytes, cuts: list[int]) -> None:
    with contextlib.suppress(EventStreamError):
        feed_all(split(data, cuts))
