"""A model's `capabilities` as the anthropic SDK's `ModelCapabilities` types them, from what the
catalogue says of the model and what the gateway does around Amazon Q."""

from __future__ import annotations

import pytest
from anthropic.types import ModelCapabilities

from q2api.amazonq.catalogue import TEXT_AND_IMAGE, TEXT_ONLY
from q2api.amazonq.reasoning_fields import parse_reasoning_fields
from q2api.models.capabilities import model_capabilities
from q2api.testing.simulated_reasoning import NATIVE_REASONING_SCHEMA

NATIVE = parse_reasoning_fields(NATIVE_REASONING_SCHEMA)


@pytest.mark.parametrize("input_types", [TEXT_AND_IMAGE, TEXT_ONLY])
@pytest.mark.parametrize("reasoning", [NATIVE, None])
def test_every_capability_the_sdk_declares_is_answered(input_types, reasoning):
    capabilities = ModelCapabilities.model_validate(model_capabilities(input_types, reasoning), strict=True)
    assert capabilities.image_input.supported == ("image" in input_types)
    # PDFs travel as their extracted text; web search runs on Kiro's; thinking in one form or another.
    assert capabilities.pdf_input.supported and capabilities.server_tools.web_search.supported
    assert capabilities.thinking.supported and capabilities.thinking.types.enabled.supported
    assert not capabilities.batch.supported and not capabilities.code_execution.supported


def test_effort_levels_are_the_catalogue_s():
    assert NATIVE is not None and set(NATIVE.efforts) == {"low", "medium", "high", "max"}
    native = ModelCapabilities.model_validate(model_capabilities(TEXT_AND_IMAGE, NATIVE))
    assert native.effort.supported and native.effort.max.supported
    assert native.effort.xhigh is not None and not native.effort.xhigh.supported
    tags = ModelCapabilities.model_validate(model_capabilities(TEXT_AND_IMAGE, None))
    assert not tags.effort.supported and not tags.effort.low.supported
