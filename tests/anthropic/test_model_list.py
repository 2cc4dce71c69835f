"""`GET /v1/models` paging follows the Anthropic list shape."""

import pytest

from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.model_list import list_models_page, model_info

MODELS = [model_info(f"m{i}", f"Model {i}") for i in range(5)]


def ids(page):
    return [model["id"] for model in page["data"]]


def test_default_page_holds_everything_small():
    page = list_models_page(MODELS, {})
    assert ids(page) == ["m0", "m1", "m2", "m3", "m4"]
    assert (page["has_more"], page["first_id"], page["last_id"]) == (False, "m0", "m4")


def test_after_id_and_before_id_walk_the_list():
    first = list_models_page(MODELS, {"limit": "2"})
    assert ids(first) == ["m0", "m1"] and first["has_more"]
    second = list_models_page(MODELS, {"limit": "2", "after_id": first["last_id"]})
    assert ids(second) == ["m2", "m3"] and second["has_more"]
    last = list_models_page(MODELS, {"limit": "2", "after_id": second["last_id"]})
    assert ids(last) == ["m4"] and not last["has_more"]
    back = list_models_page(MODELS, {"limit": "2", "before_id": "m4"})
    assert ids(back) == ["m2", "m3"] and back["has_more"]


@pytest.mark.parametrize("params", [{"limit": "0"}, {"limit": "x"}, {"limit": "1001"}, {"after_id": "nope"}])
def test_bad_paging_names_the_parameter(params):
    with pytest.raises(InvalidRequest) as caught:
        list_models_page(MODELS, params)
    assert caught.value.path in params


def test_model_info_shape():
    assert model_info("claude-sonnet-4-5", "Claude Sonnet 4.5", 200_000) == {
        "type": "model",
        "id": "claude-sonnet-4-5",
        "display_name": "Claude Sonnet 4.5",
        "created_at": "1970-01-01T00:00:00Z",
        "lifecycle": "active",
        "deprecated_at": None,
        "retires_at": None,
        "line": None,
        "object": "model",
        "created": 0,
        "owned_by": "anthropic",
        "max_input_tokens": 200_000,
    }


def test_model_info_with_output_limit_line_and_capabilities():
    capabilities = {"image_input": {"supported": False}}
    info = model_info(
        "amazon-nova", "Nova", 300_000, max_tokens=10_000, capabilities=capabilities, line=None, owned_by="amazon-q"
    )
    assert (info["max_input_tokens"], info["max_tokens"], info["owned_by"]) == (300_000, 10_000, "amazon-q")
    assert info["capabilities"] == capabilities and info["line"] is None
    assert model_info("claude-opus-4-8", "Claude Opus 4.8", line="opus")["line"] == "opus"
