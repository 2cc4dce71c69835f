"""Capabilities: an image to a model that takes none, and audio anywhere, are 400s that say so."""

from __future__ import annotations

import orjson
import pytest

from q2api.amazonq.catalogue import IMAGE, TEXT, TEXT_ONLY
from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import parse_messages_request
from q2api.conversion.capabilities import check_input_types
from q2api.conversion.claude_converter import ConversionOptions
from q2api.conversion.images import TurnImage
from q2api.conversion.turns import UserTurn
from q2api.models.table import ModelChoice, input_types_of, resolve_model
from tests.support.converter_helpers import assistant, convert, image, request_body, text, tool_result, tool_use, user

TEXT_MODEL_OPTIONS = ConversionOptions(
    conversation_id="c", model=resolve_model("tiny-coder", aliases={"tiny-coder": "tiny-coder-v1"})
)


def test_the_built_in_table_gives_input_types():
    assert resolve_model("claude-sonnet-5-5").input_types == {TEXT, IMAGE}
    assert input_types_of("claude-opus-4.6") == {TEXT, IMAGE}  # a Claude model the table lacks
    assert input_types_of("tiny-coder-v1") == TEXT_ONLY


@pytest.mark.parametrize(
    ("messages", "path"),
    [
        ([user([text("what is this?"), image()])], "messages.0.content.1"),
        (
            [user("shot"), assistant([tool_use("t1", "Screenshot")]), user([tool_result("t1", [image()])])],
            "messages.2.content.0.content.0",
        ),
    ],
    ids=["user image", "tool-result image"],
)
def test_an_image_for_a_text_only_model_is_a_400_naming_the_model_and_the_part(messages, path):
    with pytest.raises(InvalidRequest) as caught:
        convert(request_body(messages, model="tiny-coder"), options=TEXT_MODEL_OPTIONS)
    assert caught.value.path == path
    assert "model 'tiny-coder' (Amazon Q model 'tiny-coder-v1') takes no image input" in caught.value.problem


def test_text_only_models_still_take_text():
    conversion = convert(request_body([user("hello")], model="tiny-coder"), options=TEXT_MODEL_OPTIONS)
    assert conversion.model.input_types == TEXT_ONLY


def test_the_check_reads_only_the_model_description_it_is_given():
    # What the live catalogue says (supportedInputTypes) wins over any name: the field is all that counts.
    turns = [UserTurn([0], {}, images=[TurnImage(0, "messages.0.content.0", {"format": "png"})])]
    check_input_types(ModelChoice("claude-sonnet-4.5", 200_000, True), "claude-sonnet-4-5", turns)
    with pytest.raises(InvalidRequest) as caught:
        check_input_types(ModelChoice("claude-sonnet-4.5", 200_000, True, TEXT_ONLY), "claude-sonnet-4-5", turns)
    assert caught.value.path == "messages.0.content.0"


@pytest.mark.parametrize("where", ["message", "tool result"])
def test_audio_is_a_400_saying_the_backend_takes_no_audio(where):
    audio = {"type": "audio", "source": {"type": "base64", "media_type": "audio/wav", "data": "UklGRg=="}}
    messages = (
        [user([audio])]
        if where == "message"
        else [user("x"), assistant([tool_use("t1")]), user([tool_result("t1", [audio])])]
    )
    with pytest.raises(InvalidRequest) as caught:
        parse_messages_request(orjson.dumps(request_body(messages)))
    assert caught.value.path.endswith(".type")
    assert "audio input is not supported: the Amazon Q backend behind this gateway takes no audio" in str(caught.value)
    assert "Invalid value" not in str(caught.value)
