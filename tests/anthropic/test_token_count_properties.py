"""Properties of the token estimator over arbitrary input."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.anthropic import token_count
from q2api.anthropic.token_count import (
    IMAGE_MAX_TOKENS,
    base64_image_tokens,
    estimate_json_tokens,
    estimate_request_tokens,
    estimate_text_tokens,
    image_dimensions,
)
from q2api.anthropic.types import parse_messages_request

# Full Unicode, lone surrogates included (they can arrive through JSON escapes).
any_text = st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=300)
short_text = st.text(max_size=token_count._EXACT_UP_TO // 8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(any_text)
def test_text_estimate_never_raises_and_is_bounded(text: str) -> None:
    estimate = estimate_text_tokens(text)
    assert isinstance(estimate, int)
    assert (estimate == 0) == (text == "")
    # stop_conditions.OutputTokenCounter relies on at most four tokens a character.
    assert estimate <= 4 * len(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(any_text.filter(bool), min_size=1, max_size=8), st.integers(1, 5))
def test_long_text_estimate_is_positive_and_bounded(parts: list[str], factor: int) -> None:
    text = "".join(parts)
    text *= factor * (token_count._EXACT_UP_TO // len(text) + 1)  # always past the exact range
    assert len(text) > token_count._EXACT_UP_TO
    estimate = estimate_text_tokens(text)
    assert 1 <= estimate <= 4 * len(text)


@settings(max_examples=200, deadline=None)
@given(short_text, short_text)
def test_appending_text_never_lowers_the_estimate(head: str, tail: str) -> None:
    assert estimate_text_tokens(head + tail) >= estimate_text_tokens(head)


@settings(max_examples=200, deadline=None)
@given(st.lists(short_text, max_size=6))
def test_pricing_texts_together_matches_pricing_them_apart(texts: list[str]) -> None:
    together = token_count.texts_cost(texts)
    apart = sum(token_count.text_cost(t) for t in texts)
    assert together == pytest.approx(apart, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_json_estimate_never_raises(value: object) -> None:
    assert estimate_json_tokens(value) >= 1


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200) | st.binary(max_size=150).map(lambda b: base64.b64encode(b).decode()))
def test_image_pricing_never_raises(data: str) -> None:
    found = image_dimensions(data)
    assert found is None or (found[0] > 0 and found[1] > 0)
    assert 1 <= base64_image_tokens(data) <= IMAGE_MAX_TOKENS


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=0, max_size=60))
def test_image_headers_with_known_magic_and_random_rest_never_raise(rest: bytes) -> None:
    for magic in (
        b"\x89PNG\r\n\x1a\n",
        b"GIF89a",
        b"\xff\xd8\xff",
        b"RIFF\x00\x00\x00\x00WEBPVP8 ",
        b"RIFF\x00\x00\x00\x00WEBPVP8L",
    ):
        assert 1 <= base64_image_tokens(base64.b64encode(magic + rest).decode()) <= IMAGE_MAX_TOKENS


# Request bodies go through JSON, which cannot carry lone surrogates: st.text() excludes them.
json_text = st.text(max_size=300)
blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, json_text),
    st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "s"}, json_text),
    st.builds(lambda v: {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"v": v}}, json_values),
    st.builds(lambda t: {"type": "tool_result", "tool_use_id": "toolu_1", "content": t}, json_text | st.none()),
    st.builds(
        lambda d: {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": d}},
        st.text(max_size=80),
    ),
    st.builds(lambda d: {"type": "redacted_thinking", "data": d}, st.text(max_size=80)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(blocks, max_size=4), min_size=1, max_size=4), json_text)
def test_request_estimate_never_raises_and_grows_with_content(turns: list[list[dict]], system: str) -> None:
    messages = [{"role": ("user", "assistant")[i % 2], "content": content} for i, content in enumerate(turns)]
    body = {"model": "m", "max_tokens": 10, "messages": messages}
    request = parse_messages_request(json.dumps(body).encode())  # json: ints past 64 bits too
    estimate = estimate_request_tokens(request)
    assert estimate >= token_count.AMAZON_Q_HIDDEN_PROMPT_TOKENS
    with_system = parse_messages_request(json.dumps({**body, "system": system}).encode())
    assert estimate_request_tokens(with_system) >= estimate
