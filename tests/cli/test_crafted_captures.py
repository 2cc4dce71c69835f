"""Captures are input too: `q2api replay` and `q2api captures show` of a crafted capture file.

An attack round handed the commands a capture whose placeholder claimed 40 GB of image (the replay
died in a MemoryError, building it) and one whose texts held raw terminal escapes (printed as they
were, they drove the terminal). The shape is now checked first, with an error naming the field, and
every text printed from a capture has its control characters escaped.
"""

from __future__ import annotations

import orjson
import pytest

from q2api.server.captures.document import FORMAT
from q2api.server.captures.shape import NotACapture, check_capture
from tests.support.captures import environment, run_cli

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31m"


def capture(**parts: object) -> dict:
    return {
        "format": FORMAT,
        "summary": {"id": "crafted", "route": "/v1/messages", "reasons": ["upstream_rejected"], "model": ESCAPES},
        "client_request": {
            "body": {
                "model": "claude-sonnet-5-5",
                "max_tokens": 16,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}
                        ],
                    }
                ],
            }
        },
        "conversion": {
            "options": {
                "conversation_id": "c",
                "model": {"q_model_id": "claude-sonnet-4.5", "context_window": 200_000, "known": True},
            },
            "loop_policy": {"mode": "warn", "repetitions": 3, "storm_calls": 8},
            "trim_policy": {"mode": "off", "max_body_bytes": 1_200_000, "max_history_messages": 198},
            "findings": [{"severity": "warning", "kind": "k", "detail": f"tool {ESCAPES}"}],
            "debug_summary": f"summary line one\nline two {ESCAPES}",
        },
        "client_response": {"status": 400, "message": ESCAPES},
        "placeholders": [],
        **parts,
    }


HUGE = {
    "where": "client_request",
    "path": ["messages", 0, "content", 0, "source", "data"],
    "kind": "image",
    "media_type": "image/png",
    "characters": 40 * 1024**3,
    "padding": 0,
    "valid_base64": True,
}


def write(tmp_path, document: dict) -> str:
    path = tmp_path / "crafted.json"
    path.write_bytes(orjson.dumps(document))
    return str(path)


@pytest.mark.parametrize(
    "command", [("replay", "PATH", "--convert-only"), ("captures", "show", "PATH")], ids=["replay", "show"]
)
async def test_a_40_gb_placeholder_is_refused_naming_the_field(tmp_path, command) -> None:
    path = write(tmp_path, capture(placeholders=[HUGE]))
    with environment({"Q2API_DATA_DIR": str(tmp_path / "data")}):
        status, out, err = await run_cli(*(path if part == "PATH" else part for part in command), cwd=tmp_path)
    assert status == 2
    assert "placeholders[0].characters" in err, err
    assert "MemoryError" not in out + err and "Traceback" not in out + err


@pytest.mark.parametrize(
    ("damage", "field"),
    [
        ({"summary": "not an object"}, "summary"),
        ({"placeholders": [{**HUGE, "characters": 8, "where": "elsewhere"}]}, "placeholders[0].where"),
        ({"placeholders": [{**HUGE, "characters": 8, "padding": 7}]}, "placeholders[0].padding"),
        ({"placeholders": [{**HUGE, "characters": 2**40}] * 1}, "placeholders[0].characters"),
        ({"conversion": {"findings": "none"}}, "conversion.findings"),
        ({"conversion": {"options": {"conversation_id": "c", "model": "m"}}}, "conversion.options.model"),
        (
            {"conversion": {"loop_policy": {"mode": "nope", "repetitions": 3, "storm_calls": 8}}},
            "conversion.loop_policy.mode",
        ),
        ({"client_request": []}, "client_request"),
    ],
)
def test_a_damaged_capture_is_refused_naming_the_field(damage: dict, field: str) -> None:
    with pytest.raises(NotACapture, match=field.replace("[", r"\[").replace("]", r"\]")):
        check_capture(capture(**damage))


def test_placeholders_together_are_bounded_too() -> None:
    many = [{**HUGE, "characters": 40 * 1024 * 1024}] * 4
    with pytest.raises(NotACapture, match="placeholders stand for"):
        check_capture(capture(placeholders=many))


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
async def test_captures_show_prints_no_terminal_escapes(tmp_path, json_output: bool) -> None:
    path = write(tmp_path, capture())
    with environment({"Q2API_DATA_DIR": str(tmp_path / "data")}):
        status, out, err = await run_cli("captures", "show", path, *(["--json"] if json_output else []), cwd=tmp_path)
    assert status == 0, err
    assert not set(out) & {"\x1b", "\x07", "\x9b"}, repr(out)
    if json_output:
        assert orjson.loads(out)["summary"]["model"] == ESCAPES  # escaped, not lost
    else:
        assert "\\x1b]0;pwned" in out and "line two" in out


async def test_replay_prints_no_terminal_escapes(tmp_path) -> None:
    path = write(tmp_path, capture())
    with environment({"Q2API_DATA_DIR": str(tmp_path / "data")}):
        status, out, err = await run_cli("replay", path, "--convert-only", cwd=tmp_path)
    assert status == 0, err
    assert not set(out + err) & {"\x1b", "\x07", "\x9b"}, repr(out + err)
    assert "capture crafted" in out
