"""A capture file's shape, checked before anything reads it: captures are input too.

A capture is a file on disk that anyone may hand to `q2api replay` or `q2api captures show` (one
sent along with a bug report, or edited by hand). Read unchecked, a crafted one made a replay
allocate a 40 GB placeholder image (`MemoryError`), and a field of the wrong type was a Python
traceback. `check_capture` says what is wrong, naming the field:

    check_capture(document)   # raises NotACapture("placeholders[0].characters: Expected `int` <= …")

A placeholder stands for data the gateway left out of a request body, which the gateway never
takes beyond Q2API_MAX_BODY_BYTES (32 MiB by default): each is bounded by MAX_PLACEHOLDER_CHARACTERS
(base64 of 48 MiB), and all of one capture together by the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from q2api.conversion.loop_guard import LoopMode
from q2api.conversion.trimming import TrimMode

MAX_PLACEHOLDER_CHARACTERS = 64 * 1024 * 1024  # base64 of 48 MiB: more than the largest body taken
MAX_PATH_STEPS = 256
JSONObject = dict[str, Any]


class NotACapture(ValueError):
    """The file is not a capture this version can read."""


class _Placeholder(Struct):
    where: Literal["client_request", "upstream_request"]
    path: Annotated[list[str | int], Meta(max_length=MAX_PATH_STEPS)]
    kind: str
    characters: Annotated[int, Meta(ge=0, le=MAX_PLACEHOLDER_CHARACTERS)]
    media_type: str | None = None
    padding: Annotated[int, Meta(ge=0, le=2)] | None = None
    valid_base64: bool = True
    prefix: Annotated[str, Meta(max_length=1024)] | None = None


class _Model(Struct):
    q_model_id: str
    context_window: int
    known: bool
    input_types: list[str] | None = None
    max_output_tokens: int | None = None


class _Options(Struct):
    conversation_id: str
    model: _Model


class _LoopPolicy(Struct):
    mode: LoopMode
    repetitions: int
    storm_calls: int


class _TrimPolicy(Struct):
    mode: TrimMode
    max_body_bytes: int
    max_history_messages: int


class _Finding(Struct):
    severity: str
    kind: str
    message_index: int | None = None
    tool_use_id: str | None = None
    detail: str | None = None


class _Conversion(Struct):
    options: _Options | None = None
    loop_policy: _LoopPolicy | None = None
    trim_policy: _TrimPolicy | None = None
    claude_messages: int | None = None
    refused: str | None = None
    findings: list[_Finding] | None = None
    normalized: JSONObject | None = None
    debug_summary: str | None = None


class _Request(Struct):
    body: Any = None
    headers: JSONObject | None = None


class _Capture(Struct):
    """The parts a reader reads; a field this version does not know is left alone."""

    format: str
    summary: JSONObject | None = None
    gateway: JSONObject | None = None
    client_request: _Request | None = None
    conversion: _Conversion | None = None
    upstream_request: _Request | None = None
    upstream_attempts: list[JSONObject] | None = None
    upstream_response: JSONObject | None = None
    client_response: JSONObject | None = None
    timings: JSONObject | None = None
    placeholders: list[_Placeholder] | None = None


def check_capture(document: Any) -> None:
    """Raise NotACapture naming the first field of `document` (a parsed capture file) a reader cannot take."""
    if not isinstance(document, Mapping):
        raise NotACapture("a capture is a JSON object")
    try:
        capture = msgspec.convert(document, _Capture)
    except msgspec.ValidationError as exc:
        raise NotACapture(f"the capture is damaged: {_named(str(exc))}") from None
    total = sum(placeholder.characters for placeholder in capture.placeholders or ())
    if total > MAX_PLACEHOLDER_CHARACTERS:
        raise NotACapture(
            f"the capture is damaged: its placeholders stand for {total} base64 characters, "
            f"more than any request the gateway takes ({MAX_PLACEHOLDER_CHARACTERS})"
        )


def _named(message: str) -> str:
    """msgspec's `… - at `$.placeholders[0].characters`` as `placeholders[0].characters: …`."""
    problem, marker, path = message.rpartition(" - at `$")
    if not marker:
        return message
    return f"{path.rstrip('`').lstrip('.')}: {problem}"
