"""The parts of a capture file: text redaction, binary placeholders and what a replay puts back,
the identifiers masked, and the directory's bounds."""

from __future__ import annotations

import base64
import binascii
import datetime
import io
import stat

import orjson
import pypdf
import pytest
from hypothesis import given
from hypothesis import strategies as st

from q2api.anthropic.token_count import image_dimensions
from q2api.server.captures.placeholders import PDF_TEXT, filler, restored
from q2api.server.captures.redaction import (
    REDACTED,
    Placeholder,
    TextRedactor,
    mask_profile_arn,
    scrub_secrets,
    without_binary,
)
from q2api.server.captures.store import CaptureStore, capture_id
from tests.support.browser import headless_chromium

KEY = b"k" * 32


def utf8_length(text: str) -> int:
    return len(text.encode())


# ------------------------------------------------------------------ text redaction


@given(st.text(max_size=300))
def test_redacted_text_keeps_the_shape_and_size_and_nothing_of_the_letters(text):
    redacted = TextRedactor(KEY).text(text)
    assert len(redacted) == len(text) and utf8_length(redacted) == utf8_length(text)
    for original, filler_char in zip(text, redacted, strict=True):
        if original.isascii() and original.isalpha():
            assert filler_char.isascii() and filler_char.isalpha() and filler_char.isupper() == original.isupper()
        elif original.isascii() and original.isdigit():
            assert filler_char.isdigit()
        elif original.isascii():
            assert filler_char == original  # spaces, punctuation, line breaks


def test_equal_texts_get_equal_fillers_within_a_capture_and_different_ones_across_captures():
    text = "git status: nothing to commit, working tree clean"
    first, again = TextRedactor(KEY).text(text), TextRedactor(KEY).text(text)
    assert first == again != text
    assert TextRedactor(b"another key" * 3).text(text) != first
    assert TextRedactor(KEY).text(text + ".") != first + "."  # not a character-by-character cipher


def test_tags_stay_so_the_guards_see_claude_codes_reminders_as_such():
    text = "<system-reminder>\nThe file changed.\n</system-reminder>"
    redacted = TextRedactor(KEY).text(text)
    assert redacted.startswith("<system-reminder>\n") and redacted.endswith("\n</system-reminder>")
    assert "file changed" not in redacted


def test_a_request_keeps_its_structure_definitions_and_binary_data():
    body = {
        "model": "claude-sonnet-4-5",
        "metadata": {"user_id": "user_abc_account_123_session_x"},
        "system": [{"type": "text", "text": "Be brief."}],
        "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}],
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"name": "rm -rf /", "n": 5}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "removed"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}},
                ],
            },
        ],
    }
    redacted = TextRedactor(KEY).request(body)
    assert redacted["model"] == body["model"] and redacted["tools"] == body["tools"]
    assert redacted["metadata"]["user_id"] == REDACTED
    assert redacted["system"][0]["text"] != "Be brief."
    use = redacted["messages"][0]["content"][0]
    assert (use["id"], use["name"]) == ("toolu_1", "Bash")
    assert use["input"]["name"] != "rm -rf /" and isinstance(use["input"]["n"], int)  # inside an input, every string
    assert redacted["messages"][1]["content"][0]["content"] != "removed"
    assert redacted["messages"][1]["content"][1] == body["messages"][1]["content"][1]  # left to the placeholders


def test_openai_tool_call_arguments_stay_json():
    body = {
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c", "function": {"name": "f", "arguments": '{"path": "/secret/plan.md", "lines": 30}'}}
                ],
            }
        ]
    }
    arguments = TextRedactor(KEY).request(body)["messages"][0]["tool_calls"][0]["function"]["arguments"]
    parsed = orjson.loads(arguments)
    assert set(parsed) == {"path", "lines"} and parsed["lines"] == 30 and "secret" not in parsed["path"]


# ------------------------------------------------------------------ binary placeholders


@given(
    st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf", "text/plain"]),
    st.integers(0, 300_000),
)
def test_a_filler_has_the_originals_length_padding_and_validity(media_type, raw_size):
    data = base64.b64encode(b"\x01" * raw_size).decode()
    placeholder = Placeholder("client_request", ("data",), "image", media_type, len(data), data.count("="), True)
    made = filler(placeholder)
    assert len(made) == len(data) and made.count("=") == data.count("=")
    assert len(binascii.a2b_base64(made, strict_mode=True)) == raw_size


def test_invalid_data_stays_invalid_and_of_the_same_length():
    placeholder = Placeholder("client_request", ("data",), "image", "image/png", 10, 0, False)
    made = filler(placeholder)
    assert len(made) == 10
    with pytest.raises(binascii.Error):
        binascii.a2b_base64(made, strict_mode=True)


@pytest.mark.parametrize("media_type", ["image/png", "image/jpeg", "image/gif", "image/webp"])
def test_placeholder_images_are_real_images_of_their_type(media_type):
    for raw_size in (400, 5_000, 70_001):
        characters = -(-raw_size // 3) * 4
        placeholder = Placeholder("c", ("x",), "image", media_type, characters, (3 - raw_size % 3) % 3, True)
        assert image_dimensions(f"data:{media_type};base64,{filler(placeholder)}") == (1, 1)


async def test_placeholder_images_decode_in_a_browser():
    async with headless_chromium() as browser:
        page = await browser.new_page()
        for media_type in ("image/png", "image/jpeg", "image/gif", "image/webp"):
            placeholder = Placeholder("c", ("x",), "image", media_type, 6_668, 0, True)
            size = await page.evaluate(
                """url => new Promise(done => { const image = new Image();
                    image.onload = () => done(`${image.naturalWidth}x${image.naturalHeight}`);
                    image.onerror = () => done("error"); image.src = url; })""",
                f"data:{media_type};base64,{filler(placeholder)}",
            )
            assert size == "1x1", media_type


def test_a_placeholder_pdf_has_text_the_converter_can_extract():
    placeholder = Placeholder("c", ("x",), "document", "application/pdf", 40_000, 0, True)
    reader = pypdf.PdfReader(io.BytesIO(base64.b64decode(filler(placeholder))))
    assert reader.pages[0].extract_text() == PDF_TEXT


def test_binary_data_out_and_back_in_keeps_every_shape():
    png = base64.b64encode(b"\x89PNG" + b"\x00" * 100).decode()
    body = {
        "messages": [
            {"content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]},
            {"content": [{"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{png}"}}]},
            {"content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "@@@"}}]},
        ]
    }
    stripped, placeholders = without_binary(body, "client_request")
    assert png not in orjson.dumps(stripped).decode()
    assert [placeholder.valid_base64 for placeholder in placeholders] == [True, True, False]
    back = restored(stripped, placeholders, "client_request")
    assert len(back["messages"][0]["content"][0]["source"]["data"]) == len(png)
    assert back["messages"][1]["content"][0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert len(back["messages"][1]["content"][0]["image_url"]["url"]) == len(f"data:image/jpeg;base64,{png}")
    assert len(back["messages"][2]["content"][0]["source"]["data"]) == 3
    assert stripped == without_binary(back, "client_request")[0]  # the same markers again


# ------------------------------------------------------------------ identifiers and secrets


def test_a_profile_arn_keeps_its_region_not_its_account():
    assert mask_profile_arn("arn:aws:codewhisperer:eu-central-1:123456789012:profile/ABCDEFGH") == (
        "arn:aws:codewhisperer:eu-central-1:************:profile/<redacted>"
    )
    assert mask_profile_arn("not an arn") == REDACTED


def test_known_secrets_are_scrubbed_as_they_stand_in_json():
    secret = 'key"with\\quote-0123456789'
    text = orjson.dumps({"a": f"see {secret}", "b": "fine"}).decode()
    assert secret not in scrub_secrets(text, [secret]) and "fine" in scrub_secrets(text, [secret])
    assert orjson.dumps(secret).decode()[1:-1] not in scrub_secrets(text, [secret])
    assert scrub_secrets("short abc", ["abc"]) == "short abc"  # too short to be told from ordinary text


# ------------------------------------------------------------------ the directory


def at(second: int) -> datetime.datetime:
    return datetime.datetime(2026, 11, 23, 19, 19, second, tzinfo=datetime.UTC)


def test_the_store_keeps_at_most_n_files_and_m_bytes_dropping_the_oldest(tmp_path):
    store = CaptureStore(tmp_path / "captures", max_count=3, max_bytes=1_000)
    ids = [capture_id(f"req_{n:02d}", at(n)) for n in range(5)]
    for name in ids:
        store.write(name, b"{}")
    assert [entry.id for entry in store.entries()] == ids[:1:-1]  # newest first, the two oldest gone
    store.write(capture_id("req_big", at(30)), b"x" * 997)  # over the byte bound with the others: they go
    assert [entry.id for entry in store.entries()] == [capture_id("req_big", at(30)), ids[4]]
    huge = capture_id("req_huge", at(40))
    store.write(huge, b"y" * 5_000)  # alone over the bound: the newest always stays
    assert [entry.id for entry in store.entries()] == [huge]
    assert stat.S_IMODE((tmp_path / "captures" / f"{huge}.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "captures").stat().st_mode) == 0o700


def test_captures_are_found_by_id_start_or_request_id_and_nothing_else(tmp_path):
    store = CaptureStore(tmp_path)
    name = capture_id("req_b7deff17", at(1))
    store.write(name, b'{"summary": {"reasons": ["tool_loop"]}}')
    assert name == "20261123T191901000Z-req_b7deff17"
    for reference in (name, name[:12], "req_b7deff17"):
        entry = store.find(reference)
        assert entry is not None and entry.id == name
    assert store.summary(store.entries()[0])["reasons"] == ["tool_loop"]
    for bad in ("../../etc/passwd", "", "req_other"):
        assert store.find(bad) is None or bad == ""
    with pytest.raises(FileNotFoundError):
        store.read("../q2api.sqlite3")
    with pytest.raises(ValueError):
        store.write("../escape", b"{}")
    assert not store.remove("../q2api.sqlite3")
