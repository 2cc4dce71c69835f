"""The guards and the conversion record as a client and an operator see them: through the running
gateway, the official SDK as client, the simulated Amazon Q upstream, and the log."""

from __future__ import annotations

import anthropic
import pytest

from q2api.testing import scripts
from q2api.testing.simulated_services import catalogue_entry
from q2api.testing.simulated_upstream import SimulatedUpstream
from tests.support.converter_helpers import PNG, assistant, image, text, tool_result, tool_use
from tests.support.gateway_harness import MODEL, capture_logs, current_user_message, open_gateway, user
from tests.support.pdf_files import blank_pdf, pdf_document, pdf_with_text
from tests.support.tool_sessions import SEED_ROUND, Call, session

THREE_TOOL_CYCLE = [
    [Call("Read", {"file_path": "/site/index.html"}, "<html>...</html>")],
    [Call("Grep", {"pattern": "index.html"}, "README.md:3: index.html")],
    [Call("Bash", {"command": "git status --short"}, "")],
]


# ------------------------------------------------------------------ 1 and 3: the loop guard


FAILING_EDITS = [
    [Call("Edit", {"file_path": "/site/index.html", "old_string": f"<h{n}>"}, "String not found", is_error=True)]
    for n in range(8)
]


@pytest.mark.parametrize(
    ("rounds", "named", "kind"),
    [
        ([SEED_ROUND] * 5, "git status", "tool_loop_cycle"),
        (THREE_TOOL_CYCLE * 3, "a cycle of 3 tool rounds", "tool_loop_cycle"),
        (FAILING_EDITS, "Edit called 8 times in a row with 8 different inputs", "tool_loop_storm"),
    ],
    ids=["seed loop", "three-tool cycle", "storm"],
)
async def test_block_mode_refuses_the_loop_with_its_reason_logged_first(tmp_path, rounds, named, kind):
    async with open_gateway(tmp_path, Q2API_LOOP_MODE="block") as gw:
        with capture_logs() as logs, pytest.raises(anthropic.BadRequestError) as refused:
            await gw.client.messages.create(model=MODEL, max_tokens=100, messages=session(rounds))
        assert gw.sim.requests == []  # nothing went upstream
    error = refused.value.body["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("Tool loop detected: ") and named in error["message"]
    assert "send a new message" in error["message"]
    request_id = refused.value.request_id
    lines = [(line.level, line.message) for line in logs.for_request(request_id)]
    [warning] = [index for index, (_, message) in enumerate(lines) if message.startswith("tool loop suspected:")]
    assert lines[warning][0] == "WARNING" and f"[warning] {kind}" in lines[warning][1]
    assert lines[-1][1].startswith("POST /v1/messages") and warning < len(lines) - 1  # the reason, then the 400
    assert logs.request_lines()[-1].extra["status"] == 400


async def test_warn_mode_logs_the_loop_and_lets_the_request_through(tmp_path):
    async with open_gateway(tmp_path) as gw:
        gw.sim.enqueue(scripts.text_reply("done"))
        with capture_logs() as logs:
            message = await gw.client.messages.create(model=MODEL, max_tokens=100, messages=session([SEED_ROUND] * 5))
    assert message.content[0].text == "done"
    [line] = [line for line in logs.lines if line.message.startswith("tool loop suspected:")]
    assert line.level == "WARNING" and "5 times in a row" in line.message


async def test_a_new_message_from_the_user_ends_a_blocked_loop(tmp_path):
    async with open_gateway(tmp_path, Q2API_LOOP_MODE="block") as gw:
        gw.sim.enqueue(scripts.text_reply("index.html is committed"))
        messages = session([SEED_ROUND] * 5, after=[user("It is committed, stop checking and tell me.")])
        message = await gw.client.messages.create(model=MODEL, max_tokens=100, messages=messages)
    assert message.content[0].text == "index.html is committed"


# ------------------------------------------------------------------ 2: repairs visible by default


async def test_repairs_are_logged_without_the_debug_flag(gw):
    gw.sim.enqueue(scripts.text_reply("ok"))
    messages = [
        user("look at these"),
        assistant([tool_use("t1", "Bash"), tool_use("t2", "Bash")]),
        user([tool_result("t1", "ok"), tool_result("gone", "from before /compact"), *[image()] * 11]),
    ]
    with capture_logs() as logs:
        message = await gw.client.messages.create(model=MODEL, max_tokens=50, messages=messages)
    lines = logs.for_request(message._request_id)
    [normalized] = [line for line in lines if line.message == "messages normalized:"]
    assert normalized.level == "INFO"
    assert {key: normalized.extra[key] for key in normalized.extra if key != "request_id"} == {
        "before": 3,
        "after": 3,
        "orphan_tool_result": 1,
        "cancelled_tool_result": 1,
        "image_dropped": 1,
    }
    warnings = [line.message for line in lines if line.level == "WARNING"]
    assert any("orphan_tool_result" in line and "tool=gone" in line for line in warnings)
    assert any("cancelled_tool_result" in line and "tool=t2" in line for line in warnings)
    assert any("image_dropped" in line and "messages.2.content.2" in line for line in warnings)
    assert all(line.startswith("conversion finding: [warning] ") for line in warnings)
    assert "=== Message Conversion Debug ===" not in logs.text  # that one stays behind the flag


# ------------------------------------------------------------------ 5: capabilities


async def test_an_image_for_a_text_only_model_is_a_400_naming_the_model_and_the_part(tmp_path):
    def text_only_model(sim: SimulatedUpstream) -> None:  # the account's catalogue says TEXT only
        sim.services.catalogue.append(catalogue_entry("tiny-coder-v1", input_types=("TEXT",)))

    async with open_gateway(tmp_path, prepare=text_only_model, Q2API_MODEL_MAP="tiny-coder=tiny-coder-v1") as gw:
        with pytest.raises(anthropic.BadRequestError) as refused:
            await gw.client.messages.create(
                model="tiny-coder", max_tokens=50, messages=[user([text("what is it?"), image()])]
            )
        assert gw.sim.requests == []
    message = refused.value.body["error"]["message"]
    assert message.startswith(
        "messages.0.content.1: model 'tiny-coder' (Amazon Q model 'tiny-coder-v1') takes no image"
    )


async def test_audio_is_a_400_that_says_the_backend_takes_no_audio(gw):
    audio = {"type": "audio", "source": {"type": "base64", "media_type": "audio/wav", "data": "UklGRg=="}}
    with pytest.raises(anthropic.BadRequestError) as refused:
        await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[user([audio, text("transcribe")])])
    assert refused.value.body["error"]["message"] == (
        "messages.0.content.0.type: audio input is not supported: the Amazon Q backend behind this gateway takes "
        "no audio, only text and images; send a transcript of the audio as text instead"
    )


async def test_a_pdf_reaches_the_model_as_its_extracted_text(gw):
    gw.sim.enqueue(scripts.text_reply("It says revenue grew."))
    pdf = pdf_document(pdf_with_text("Revenue grew 12% in Q3."), title="q3")
    with capture_logs() as logs:
        await gw.client.messages.create(model=MODEL, max_tokens=50, messages=[user([pdf, text("Summarise.")])])
    content = current_user_message(gw.upstream_body())["content"]
    assert "[PDF 'q3' — text extracted by q2api, page 1 of 1]\nRevenue grew 12% in Q3." in content
    assert "Document omitted" not in content
    assert any(line.level == "WARNING" and "pdf_text_extracted" in line.message for line in logs.lines)


async def test_a_pdf_without_text_is_a_400_that_says_so(gw):
    with pytest.raises(anthropic.BadRequestError) as refused:
        await gw.client.messages.create(
            model=MODEL, max_tokens=50, messages=[user([pdf_document(blank_pdf()), text("read it")])]
        )
    assert "has no extractable text" in refused.value.body["error"]["message"]
    assert gw.sim.requests == []


# ------------------------------------------------------------------ 6: the image notes


async def test_twelve_tool_result_images_ten_sent_and_the_notes_tell_the_truth(gw):
    gw.sim.enqueue(scripts.text_reply("seen"))
    shots = [tool_result(f"t{n}", [text("shots"), *[image(PNG)] * 6]) for n in (1, 2)]
    messages = [user("screenshots please"), assistant([tool_use("t1", "Shot"), tool_use("t2", "Shot")]), user(shots)]
    await gw.client.messages.create(model=MODEL, max_tokens=50, messages=messages)
    sent = current_user_message(gw.upstream_body())
    assert len(sent["images"]) == 10
    notes = [result["content"][-1]["text"] for result in sent["userInputMessageContext"]["toolResults"]]
    assert notes[0].startswith("[This tool result returned 6 images: images 3–6 of them attached")
    assert "images 1–2 not sent" in notes[0]
    assert notes[1] == "[This tool result returned 6 images, attached to this message as attachments 5–10]"
