"""The live model catalogue through the running gateway and the official SDK: `/v1/models`, model
resolution with `Q2API_UNKNOWN_MODEL`, the `x-q2api-upstream-model` header, and an upstream that
rejects unknown model ids (it must never be sent one)."""

from __future__ import annotations

import re

import anthropic
import pytest

from q2api.testing import scripts
from q2api.testing.simulated_services import catalogue_entry
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.gateway_harness import Gateway, assert_error_envelope, capture_logs, open_gateway, user

OPUS_4_6 = catalogue_entry(
    "claude-opus-4.6", name="Claude Opus 4.6", max_input_tokens=1_000_000, max_output_tokens=128_000
)
OPUS_4_5 = catalogue_entry("claude-opus-4.5", name="Claude Opus 4.5", max_input_tokens=200_000)
TEXT_ONLY = catalogue_entry(
    "amazon-nova-lite", name="Nova Lite", max_input_tokens=300_000, max_output_tokens=10_000, input_types=("TEXT",)
)
HEADER = "x-q2api-upstream-model"


def catalogue(*entries):
    def prepare(sim: SimulatedUpstream) -> None:
        sim.services.catalogue = list(entries)
        sim.services.default_model = None
        sim.services.page_size = 1  # one model per page: the gateway must follow nextToken
        sim.services.reject_unknown_models = True  # as Amazon Q: 400 INVALID_MODEL_ID

    return prepare


async def served_model(gw: Gateway, model: str, **options) -> tuple[str, str]:
    """(the x-q2api-upstream-model header, the modelId the upstream received) for one request."""
    gw.sim.enqueue(scripts.text_reply("ok"))
    raw = await gw.client.messages.with_raw_response.create(
        model=model, max_tokens=options.get("max_tokens", 64), messages=[user("hi")]
    )
    await raw.parse()
    body = gw.upstream_body()
    return raw.headers[HEADER], body["conversationState"]["currentMessage"]["userInputMessage"]["modelId"]


async def test_models_list_is_exactly_the_live_catalogue_with_its_windows(tmp_path):
    async with open_gateway(tmp_path, prepare=catalogue(OPUS_4_6, TEXT_ONLY)) as gw:
        models = [model async for model in gw.client.models.list()]
        async with gw.http() as http:
            raw = (await http.get("/v1/models")).json()

    assert [model.id for model in models] == ["claude-opus-4-6", "amazon-nova-lite"]
    opus, nova = models
    assert (opus.display_name, opus.max_input_tokens, opus.max_tokens) == ("Claude Opus 4.6", 1_000_000, 128_000)
    assert (nova.display_name, nova.max_input_tokens, nova.max_tokens) == ("Nova Lite", 300_000, 10_000)
    opus_raw, nova_raw = raw["data"]
    assert opus_raw["capabilities"]["image_input"] == {"supported": True}
    assert nova_raw["capabilities"]["image_input"] == {"supported": False}
    assert (opus.line, nova.line) == ("opus", None) and opus.lifecycle == "active"
    # The OpenAI fields, so the OpenAI SDK's models.list() reads the same list.
    assert {(entry["object"], entry["owned_by"]) for entry in raw["data"]} == {
        ("model", "anthropic"),
        ("model", "amazon-q"),
    }
    # Two pages of one model each: the gateway followed nextToken to the end.
    assert [
        params.get("nextToken")
        for _flavour, operation, params in gw.sim.services.requests
        if operation == "ListAvailableModels"
    ] == [None, "1"]


@pytest.mark.parametrize(
    "requested",
    [
        "claude-opus-4-6",
        "claude-opus-4-6[1m]",
        "claude-opus-4.6",
        "claude-opus-4-6-20260115",
        "anthropic.claude-opus-4-6-v1:0",
        "us.anthropic.claude-opus-4-6-20260115-v1:0",
    ],
)
async def test_spellings_of_a_catalogue_model_reach_the_upstream_as_its_id(tmp_path, requested):
    async with open_gateway(tmp_path, prepare=catalogue(OPUS_4_6, TEXT_ONLY)) as gw:
        with capture_logs() as logs:
            header, sent = await served_model(gw, requested)
    assert (header, sent) == ("claude-opus-4.6", "claude-opus-4.6")
    assert not [line for line in logs.lines if line.message.startswith("model substituted")]


async def test_unknown_model_in_family_mode_gets_the_newest_of_its_family_named_and_logged(tmp_path):
    async with open_gateway(tmp_path, prepare=catalogue(OPUS_4_5, OPUS_4_6, TEXT_ONLY)) as gw:
        with capture_logs() as logs:
            header, sent = await served_model(gw, "claude-opus-9-9")
    assert (header, sent) == ("claude-opus-4.6", "claude-opus-4.6")
    [warning] = [line for line in logs.lines if line.message.startswith("model substituted")]
    assert warning.level == "WARNING"
    assert "requested=claude-opus-9-9 upstream=claude-opus-4.6" in warning.message


async def test_a_streamed_reply_names_its_model_too(tmp_path):
    async with open_gateway(tmp_path, prepare=catalogue(OPUS_4_5, OPUS_4_6)) as gw:
        gw.sim.enqueue(scripts.text_reply("streamed"))
        body = {"model": "claude-opus-9-9", "max_tokens": 64, "stream": True, "messages": [user("hi")]}
        async with gw.http() as http, http.stream("POST", "/v1/messages", json=body) as response:
            assert response.status_code == 200
            assert response.headers[HEADER] == "claude-opus-4.6"
            assert response.headers["content-type"].startswith("text/event-stream")
            await response.aread()


async def test_unknown_model_in_default_mode_gets_the_default_model(tmp_path):
    prepare = catalogue(OPUS_4_6, TEXT_ONLY)
    async with open_gateway(
        tmp_path, prepare=prepare, Q2API_UNKNOWN_MODEL="default", Q2API_DEFAULT_MODEL="amazon-nova-lite"
    ) as gw:
        with capture_logs() as logs:
            header, sent = await served_model(gw, "claude-opus-9-9")
    assert (header, sent) == ("amazon-nova-lite", "amazon-nova-lite")
    assert [line.level for line in logs.lines if line.message.startswith("model substituted")] == ["WARNING"]


async def test_unknown_model_in_reject_mode_is_a_404_listing_the_catalogue(tmp_path):
    async with open_gateway(tmp_path, prepare=catalogue(OPUS_4_6, TEXT_ONLY), Q2API_UNKNOWN_MODEL="reject") as gw:
        with pytest.raises(anthropic.NotFoundError) as caught:
            await gw.client.messages.create(model="claude-opus-9-9", max_tokens=64, messages=[user("hi")])
        assert gw.sim.requests == []
    message = assert_error_envelope(caught.value.body, "not_found_error")
    assert "claude-opus-9-9" in message and "claude-opus-4-6" in message and "amazon-nova-lite" in message


async def test_a_model_of_no_known_family_is_a_404_listing_what_is_available(tmp_path):
    async with open_gateway(tmp_path, prepare=catalogue(OPUS_4_6, TEXT_ONLY)) as gw:
        for model in ("gpt-4o", "claude-sonnet-5-5"):  # no family at all; a family the catalogue lacks
            with pytest.raises(anthropic.NotFoundError) as caught:
                await gw.client.messages.create(model=model, max_tokens=64, messages=[user("hi")])
            message = assert_error_envelope(caught.value.body, "not_found_error")
            assert model in message and "claude-opus-4-6, amazon-nova-lite" in message
        assert gw.sim.requests == []


async def test_an_upstream_that_rejects_unknown_ids_is_never_sent_one(tmp_path):
    requested = ["claude-opus-4-6", "claude-opus-4-6[1m]", "claude-opus-9-9", "claude-opus-4-5", "amazon-nova-lite"]
    async with open_gateway(tmp_path, prepare=catalogue(OPUS_4_6, TEXT_ONLY)) as gw:
        for model in requested:
            header, sent = await served_model(gw, model)
            assert header == sent
        sent_ids = {
            request.body["conversationState"]["currentMessage"]["userInputMessage"]["modelId"]
            for request in gw.sim.requests
        }
    assert sent_ids == {"claude-opus-4.6", "amazon-nova-lite"}
    assert len(gw.sim.requests) == len(requested)  # every one answered 200, none 400 INVALID_MODEL_ID


async def test_max_tokens_above_the_output_limit_is_clamped_and_logged(tmp_path):
    async with open_gateway(tmp_path, prepare=catalogue(OPUS_4_6, TEXT_ONLY)) as gw:
        with capture_logs() as logs:
            await served_model(gw, "amazon-nova-lite", max_tokens=64_000)
    [line] = [line for line in logs.lines if line.message.startswith("max_tokens clamped")]
    assert "requested=64000 limit=10000 model=amazon-nova-lite" in line.message


async def test_the_context_window_of_the_catalogue_sizes_prompt_too_long(tmp_path):
    async with open_gateway(tmp_path, prepare=catalogue(OPUS_4_6, TEXT_ONLY)) as gw:
        gw.sim.enqueue(scripts.context_overflow())
        with pytest.raises(anthropic.BadRequestError) as caught:
            await gw.client.messages.create(model="claude-opus-4-6", max_tokens=64, messages=[user("hi")])
    message = assert_error_envelope(caught.value.body, "invalid_request_error")
    # The maximum is the catalogue's window; what follows in parentheses is which host refused what size.
    assert re.match(r"prompt is too long: \d+ tokens > 1000000 maximum( \(|$)", message), message


async def test_an_upstream_without_a_catalogue_leaves_the_built_in_table_with_a_warning(tmp_path):
    def failing(sim: SimulatedUpstream) -> None:
        sim.services.failure = scripts.server_error(500)

    with capture_logs() as logs:
        async with open_gateway(tmp_path, prepare=failing) as gw:
            ids = [model.id async for model in gw.client.models.list()]
            header, _ = await served_model(gw, "claude-sonnet-5-5-20260101")
    assert "claude-sonnet-5-5" in ids and "claude-opus-5-5" in ids
    assert header == "claude-sonnet-5.5"
    assert any(line.level == "WARNING" and "using the built-in model table" in line.message for line in logs.lines)


async def test_a_large_request_prepared_off_the_event_loop_is_resolved_and_named_too(tmp_path):
    # Bodies over 1 MiB are prepared in a worker thread.
    async with open_gateway(tmp_path, prepare=catalogue(OPUS_4_6)) as gw:
        gw.sim.enqueue(scripts.text_reply("big"))
        part = "x" * 400_000  # three of them: over 1 MiB, each within one Amazon Q message
        messages = [
            user(part),
            {"role": "assistant", "content": "ok"},
            user(part),
            {"role": "assistant", "content": "ok"},
            user(part),
        ]
        raw = await gw.client.messages.with_raw_response.create(
            model="claude-opus-9-9", max_tokens=64, messages=messages
        )
        await raw.parse()
        assert raw.headers[HEADER] == "claude-opus-4.6"
        assert (
            gw.upstream_body()["conversationState"]["currentMessage"]["userInputMessage"]["modelId"]
            == "claude-opus-4.6"
        )


async def test_without_discovery_amazon_q_is_never_asked_and_the_built_in_table_serves(tmp_path):
    async with open_gateway(tmp_path, Q2API_MODEL_DISCOVERY="false") as gw:
        ids = [model.id async for model in gw.client.models.list()]
        header, sent = await served_model(gw, "claude-opus-9-9")
        async with gw.http() as http:
            health = (await http.get("/healthz")).json()
    assert ids[:3] == ["claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"]
    assert (header, sent) == ("claude-opus-5.5", "claude-opus-5.5")  # the built-in table's newest opus
    assert gw.sim.services.requests == []
    assert health["accounts"][0]["credits"] is None
