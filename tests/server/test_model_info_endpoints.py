"""One model (`GET /v1/models/{id}`, the SDKs' `models.retrieve`) with its capabilities, and the
catalogue as Codex asks for it (`GET /v1/models?client_version=…`), from the live catalogue of the
simulated Amazon Q, through the running gateway and the official SDKs.
"""

from __future__ import annotations

from pathlib import Path

import anthropic
import pytest
from anthropic.types import ModelCapabilities

from q2api.tenants.database import open_tenant_database
from q2api.tenants.keys import KeyLimits, KeyStore
from q2api.testing.simulated_reasoning import NATIVE_REASONING_SCHEMA
from q2api.testing.simulated_services import catalogue_entry
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import CLIENT_KEY, open_gateway, sdk
from tests.support.openai_harness import openai_client

REASONING = catalogue_entry(
    "claude-opus-4.6",
    name="Claude Opus 4.6",
    max_input_tokens=1_000_000,
    max_output_tokens=128_000,
    reasoning_schema=NATIVE_REASONING_SCHEMA,
)
TEXT_ONLY = catalogue_entry(
    "amazon-nova-lite", name="Nova Lite", max_input_tokens=300_000, max_output_tokens=10_000, input_types=("TEXT",)
)
SONNET = catalogue_entry("claude-sonnet-4.5", name="Claude Sonnet 4.5", max_input_tokens=200_000)


def catalogue(sim: SimulatedUpstream) -> None:
    sim.services.catalogue = [REASONING, TEXT_ONLY, SONNET]
    sim.services.default_model = None


async def test_models_retrieve_describes_one_model_with_its_capabilities(tmp_path: Path):
    async with open_gateway(tmp_path, prepare=catalogue) as gw:
        opus = await gw.client.models.retrieve("claude-opus-4-6")
        nova = await gw.client.models.retrieve("amazon-nova-lite")
        # Another spelling of a served model is that model; a model not served is a 404, never a substitute.
        dated = await gw.client.models.retrieve("claude-sonnet-4-5-20250929")
        with pytest.raises(anthropic.NotFoundError) as missing:
            await gw.client.models.retrieve("claude-opus-3-0")
        async with gw.http() as http:
            raw = (await http.get("/v1/models/claude-opus-4-6")).json()

    assert (opus.id, opus.display_name, opus.max_input_tokens, opus.max_tokens) == (
        "claude-opus-4-6",
        "Claude Opus 4.6",
        1_000_000,
        128_000,
    )
    assert opus.type == "model" and opus.lifecycle == "active" and opus.line == "opus"
    capabilities = opus.capabilities
    assert capabilities is not None
    # Every key the SDK's type declares, each of its own type: validated, not just read.
    ModelCapabilities.model_validate(raw["capabilities"], strict=True)
    assert capabilities.image_input.supported and capabilities.pdf_input.supported
    assert capabilities.thinking.supported and capabilities.thinking.types.adaptive.supported
    assert capabilities.effort.supported and capabilities.effort.high.supported  # the catalogue's levels
    assert capabilities.server_tools.web_search.supported and not capabilities.server_tools.code_execution.supported
    assert not capabilities.batch.supported
    # Emulated by the gateway (issue 32 items 2-4): structured outputs, context management, between_tools.
    assert capabilities.structured_outputs.supported
    assert capabilities.context_management.supported and capabilities.context_management.compact_20260112.supported
    assert capabilities.context_management.clear_tool_uses_20250919.supported
    assert capabilities.thinking.types.between_tools.supported

    assert nova.line is None and nova.capabilities is not None
    assert not nova.capabilities.image_input.supported and not nova.capabilities.effort.supported
    assert dated.id == "claude-sonnet-4-5" and dated.max_input_tokens == 200_000
    assert missing.value.status_code == 404 and missing.value.body["error"]["type"] == "not_found_error"
    assert "claude-opus-3-0" in missing.value.body["error"]["message"]


async def test_the_openai_sdk_retrieves_the_same_model(tmp_path: Path):
    async with open_gateway(tmp_path, prepare=catalogue) as gw, openai_client(gw) as client:
        model = await client.models.retrieve("claude-opus-4-6")
        listed = [entry.id async for entry in client.models.list()]
    assert (model.id, model.object, model.owned_by) == ("claude-opus-4-6", "model", "anthropic")
    assert model.id in listed


async def test_a_key_limited_to_some_models_sees_only_those(tmp_path: Path):
    database = await open_tenant_database(None, tmp_path)
    try:
        key, _ = await KeyStore(database).create("one-model", KeyLimits(models=("claude-sonnet-4-5",)))
    finally:
        await database.close()
    async with open_gateway(tmp_path, prepare=catalogue) as gw:
        client = sdk(gw.base_url, api_key=key)
        assert (await client.models.retrieve("claude-sonnet-4-5")).id == "claude-sonnet-4-5"
        with pytest.raises(anthropic.NotFoundError):
            await client.models.retrieve("claude-opus-4-6")
        assert [model.id async for model in client.models.list()] == ["claude-sonnet-4-5"]


async def test_codex_gets_its_catalogue_beside_the_list(tmp_path: Path):
    async with open_gateway(tmp_path, prepare=catalogue) as gw, gw.http() as http:
        codex = (await http.get("/v1/models", params={"client_version": "0.171.0", "limit": "1"})).json()
        plain = (await http.get("/v1/models")).json()

    assert "models" not in plain
    assert [entry["id"] for entry in codex["data"]] == ["claude-opus-4-6"] and codex["has_more"]  # the page
    models = codex["models"]  # every model at once: Codex does not page
    assert [model["slug"] for model in models] == ["claude-opus-4-6", "amazon-nova-lite", "claude-sonnet-4-5"]
    opus, nova, _ = models
    assert opus["context_window"] == 1_000_000 and opus["input_modalities"] == ["text", "image"]
    assert nova["input_modalities"] == ["text"]
    assert [model["priority"] for model in models] == [1, 2, 3]
    for model in models:
        # What Codex 0.171.0 requires of each entry (it refuses the whole answer otherwise).
        for field in (
            "slug",
            "display_name",
            "supported_reasoning_levels",
            "shell_type",
            "visibility",
            "supported_in_api",
            "priority",
            "base_instructions",
            "supports_reasoning_summaries",
            "support_verbosity",
            "truncation_policy",
            "supports_parallel_tool_calls",
            "experimental_supported_tools",
        ):
            assert field in model, field
        assert model["apply_patch_tool_type"] == "freeform" and "apply_patch" in model["base_instructions"]
        assert {level["effort"] for level in model["supported_reasoning_levels"]} >= {"low", "medium", "high"}
    assert CLIENT_KEY not in str(codex)
