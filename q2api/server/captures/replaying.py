"""A capture read back, for `q2api replay`: its requests with the placeholders filled, the current
version's conversion of its client request, and how that compares with what was captured. Pure.

The conversion runs with the options and guard policies the capture recorded (the model it went
to, the conversation id, the loop and trim settings), so a difference comes from the code, not
from the machine it runs on.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from q2api.anthropic.errors import AnthropicError
from q2api.conversion.pipeline import GuardedConversion, convert_guarded
from q2api.models.routing import clamp_max_tokens
from q2api.server.captures.document import (
    FORMAT,
    finding_keys,
    finding_view,
    loop_policy_from_view,
    options_from_view,
    trim_policy_from_view,
)
from q2api.server.captures.placeholders import restored
from q2api.server.captures.redaction import Placeholder, without_binary
from q2api.server.captures.shape import NotACapture, check_capture
from q2api.server.doors import CLAUDE, FRONT_DOORS

__all__ = ["LoadedCapture", "NotACapture", "Reconversion"]


@dataclass(frozen=True, slots=True)
class Reconversion:
    """The current version's run of the pipeline on a captured client request."""

    guarded: GuardedConversion | None
    error: AnthropicError | None  # the request was refused before any conversion (a 400)

    @property
    def findings(self) -> list[dict[str, Any]]:
        return [finding_view(finding) for finding in self.guarded.findings] if self.guarded else []


class LoadedCapture:
    def __init__(self, document: Mapping[str, Any]) -> None:
        if not isinstance(document, Mapping) or document.get("format") != FORMAT:
            shown = document.get("format") if isinstance(document, Mapping) else None
            raise NotACapture(f"not a {FORMAT} file (format {shown!r})")
        check_capture(document)
        self.document = document
        self.summary: Mapping[str, Any] = document.get("summary") or {}
        self.placeholders = [Placeholder.from_dict(fields) for fields in document.get("placeholders") or ()]
        route = str(self.summary.get("route") or CLAUDE.front.route)
        door = FRONT_DOORS.get(route)
        if door is None:
            raise NotACapture(f"this version has no front door for {route}")
        self.door = door

    @property
    def conversion_view(self) -> Mapping[str, Any]:
        return self.document.get("conversion") or {}

    @property
    def captured_findings(self) -> list[dict[str, Any]]:
        return list(self.conversion_view.get("findings") or ())

    def client_body(self) -> Any:
        """The client's request, its images and documents filled with same-shape placeholders."""
        return restored(self.document["client_request"]["body"], self.placeholders, "client_request")

    def upstream_body(self) -> dict[str, Any] | None:
        """The Amazon Q request as captured, filled, without its (masked) profileArn: whoever sends it
        adds the profile ARN of the account that sends it."""
        upstream = self.document.get("upstream_request")
        if not upstream or not isinstance(upstream.get("body"), dict):
            return None
        body = restored(upstream["body"], self.placeholders, "upstream_request")
        body.pop("profileArn", None)
        return dict(body)

    def reconvert(self) -> Reconversion:
        view = self.conversion_view
        if not view.get("options"):
            raise NotACapture("the capture holds no conversion options (the request failed before its conversion)")
        options = options_from_view(view["options"])
        try:
            request = clamp_max_tokens(self.door.read(orjson.dumps(self.client_body())).request, options.model)
            guarded = convert_guarded(
                request, options, loop_policy_from_view(view["loop_policy"]), trim_policy_from_view(view["trim_policy"])
            )
        except AnthropicError as error:
            return Reconversion(None, error)
        return Reconversion(guarded, None)

    def same_findings(self, reconversion: Reconversion) -> bool:
        """Whether the current version reports what was captured (severity, kind, message, tool call)."""
        return finding_keys(self.captured_findings) == finding_keys(reconversion.findings)

    def diff(self, reconversion: Reconversion) -> str:
        """A unified diff from the Amazon Q body captured to the one the current version builds ("" when equal)."""
        upstream = self.document.get("upstream_request") or {}
        captured = upstream.get("body")
        current: Any = None
        if reconversion.guarded is not None and reconversion.guarded.conversion is not None:
            current, _ = without_binary(reconversion.guarded.conversion.payload, "upstream_request")
            if isinstance(captured, dict) and isinstance(captured.get("profileArn"), str):
                current = {**current, "profileArn": captured["profileArn"]}  # added when sending, and masked
            current = {key: current[key] for key in _in_order(current, captured)}
        if captured == current:
            return ""
        return "".join(
            difflib.unified_diff(
                _lines(captured),
                _lines(current),
                fromfile="captured upstream request",
                tofile="current version",
            )
        )


def _in_order(current: Mapping[str, Any], captured: Any) -> list[str]:
    """`current`'s keys, in the captured body's order where it has them (the sender puts profileArn last)."""
    order = list(captured) if isinstance(captured, Mapping) else []
    return [key for key in order if key in current] + [key for key in current if key not in order]


def _lines(document: Any) -> list[str]:
    if document is None:
        return ["(none)\n"]
    return [line + "\n" for line in orjson.dumps(document, option=orjson.OPT_INDENT_2).decode().splitlines()]
