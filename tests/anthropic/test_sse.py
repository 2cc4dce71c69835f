"""SSE encoding: one `event:` line and one single-line `data:` per event, parsed back by the SDK's decoder."""

from __future__ import annotations

import orjson
import pytest
from anthropic._streaming import SSEDecoder
from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.anthropic.sse import PING_EVENT, SseEncoder, encode_sse, encode_sse_event


def decode(data: bytes) -> list[tuple[str | None, dict]]:
    decoder = SSEDecoder()
    return [(sse.event, sse.json()) for sse in decoder.iter_bytes(iter([data]))]


def test_exact_bytes_of_one_event():
    event = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}
    assert encode_sse([event]) == (
        b"event: content_block_delta\n"
        b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n'
    )
    assert encode_sse_event(event) == encode_sse([event])


def test_ping():
    assert SseEncoder.ping == b'event: ping\ndata: {"type":"ping"}\n\n'
    assert encode_sse([PING_EVENT]) == SseEncoder.ping


def test_empty_batch_is_empty_bytes():
    assert encode_sse([]) == b""


def test_line_breaks_in_strings_never_split_the_data_line():
    text = "line1\nline2\r\nline3\rline4\u2028\u2029\x00"
    event = {"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": text}}
    data = encode_sse([event])
    assert data.count(b"\n") == 3 and b"\r" not in data
    assert decode(data) == [("content_block_delta", event)]


def test_unknown_event_types_get_their_own_event_line():
    assert encode_sse([{"type": "custom_thing", "x": 1}]).startswith(b"event: custom_thing\ndata: ")


def test_event_type_with_a_line_break_is_refused():
    with pytest.raises(ValueError):
        encode_sse([{"type": "bad\nname"}])


TEXTS = st.text(max_size=30)
EVENTS = st.one_of(
    st.builds(
        lambda i, t: {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}},
        st.integers(0, 5),
        TEXTS,
    ),
    st.builds(lambda i: {"type": "content_block_stop", "index": i}, st.integers(0, 5)),
    st.just({"type": "message_stop"}),
    st.just({"type": "ping"}),
    st.builds(lambda m: {"type": "error", "error": {"type": "api_error", "message": m}}, TEXTS),
)


@settings(max_examples=200, deadline=None)
@given(events=st.lists(EVENTS, max_size=10))
def test_the_sdk_decoder_reads_back_exactly_what_was_encoded(events):
    decoded = decode(encode_sse(events))
    assert decoded == [(e["type"], orjson.loads(orjson.dumps(e))) for e in events]
