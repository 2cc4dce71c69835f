"""What one capture file holds, built from what a request did (`CaptureMaterial`). Pure but for the
random key of text redaction; runs in a worker thread, off the event loop.

    format              "q2api-capture/1"
    summary             id, time, request id, route, reasons, models, statuses, counts: what a list shows
    gateway             q2api's version and settings (secrets only as set / unset)
    client_request      the client's headers (an allow-list) and body
    conversion          the options and guard policies it ran with, its findings, the
                        `messages normalized:` record, the DEBUG_MESSAGE_CONVERSION block
    upstream_request    the body sent to Amazon Q (exactly, unless text is redacted) and its headers
    upstream_attempts   every call: host, account, outcome, status, milliseconds
    upstream_response   Amazon Q's refusal: status, request id, code, reason, message, body
    client_response     what the client got: status, error type, message
    timings             where the time went (the log line's *_ms fields)
    placeholders        each piece of binary data left out: where, and its shape

With text redaction the client's texts are replaced first, and everything after the client
request — conversion, findings, the Amazon Q body — is the pipeline run again on that redacted
request with the same options (q2api.conversion.pipeline): the same shape as what was sent, and
what `q2api replay --convert-only` reproduces.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from q2api import __version__
from q2api.amazonq.attempts import UpstreamTrace
from q2api.amazonq.errors import UpstreamHTTPError
from q2api.amazonq.upstream import FIXED_HEADERS
from q2api.anthropic.errors import AnthropicError
from q2api.conversion.claude_converter import ConversionOptions
from q2api.conversion.debug_summary import conversion_summary
from q2api.conversion.loop_guard import LoopMode, LoopPolicy
from q2api.conversion.normalization import normalization_record
from q2api.conversion.pipeline import GuardedConversion, convert_guarded
from q2api.conversion.report import Finding
from q2api.conversion.trimming import TrimMode, TrimPolicy
from q2api.frontdoors.door import FrontDoor
from q2api.models.routing import clamp_max_tokens
from q2api.models.table import ModelChoice
from q2api.server.captures.placeholders import restored
from q2api.server.captures.redaction import (
    REDACTED,
    Placeholder,
    TextRedactor,
    mask_profile_arn,
    scrub_secrets,
    without_binary,
)
from q2api.settings import SECRET_FIELDS, Settings

FORMAT = "q2api-capture/1"
_UPSTREAM_BODY_CHARS = 64 * 1024


@dataclass(frozen=True, slots=True)
class CaptureMaterial:
    """Everything a capture is made of, taken (by reference) when the request ends."""

    capture_id: str
    captured_at: datetime.datetime
    reasons: tuple[str, ...]
    request_id: str
    door: FrontDoor
    client_headers: Mapping[str, str]
    client_body: bytes
    model: str
    upstream_model: str
    options: ConversionOptions | None
    loop_policy: LoopPolicy
    trim_policy: TrimPolicy
    claude_message_count: int | None
    guarded: GuardedConversion | None
    trace: UpstreamTrace | None
    client_status: int
    client_error_type: str | None
    client_message: str | None
    timings: Mapping[str, float | None]


def capture_document(material: CaptureMaterial, settings: Settings, *, redact_text: bool) -> bytes:
    """The capture file's bytes (indented JSON, secrets scrubbed)."""
    client_body: Any = _json_or_text(material.client_body)
    client_body = _without_user_id(client_body)
    placeholders: list[Placeholder] = []
    client_stripped, found = without_binary(client_body, "client_request")
    placeholders.extend(found)
    guarded = material.guarded
    upstream_body: Any = None
    rebuilt = False
    if redact_text and isinstance(client_body, dict):
        redacted = TextRedactor(os.urandom(32)).request(restored(client_stripped, found, "client_request"))
        client_stripped, _ = without_binary(redacted, "client_request")
        guarded, upstream_body = _rebuilt(material, redacted)
        rebuilt = True
    elif material.trace is not None and material.trace.sent_body is not None:
        upstream_body = orjson.loads(material.trace.sent_body)
    elif guarded is not None and guarded.conversion is not None:
        upstream_body = guarded.conversion.payload
    if isinstance(upstream_body, dict):
        upstream_body = _with_masked_arn(upstream_body, material)
        upstream_body, found = without_binary(upstream_body, "upstream_request")
        placeholders.extend(found)

    findings = guarded.findings if guarded is not None else ()
    conversion = guarded.conversion if guarded is not None else None
    record = normalization_record(material.claude_message_count or 0, conversion) if conversion else None
    failure = material.trace.failure if material.trace is not None else None
    upstream_error = failure if isinstance(failure, UpstreamHTTPError) else None
    document = {
        "format": FORMAT,
        "summary": {
            "id": material.capture_id,
            "captured_at": material.captured_at.astimezone(datetime.UTC).isoformat(timespec="milliseconds"),
            "request_id": material.request_id,
            "route": material.door.route,
            "reasons": list(material.reasons),
            "model": material.model,
            "upstream_model": material.upstream_model,
            "status": material.client_status,
            "error_type": material.client_error_type,
            "upstream_status": upstream_error.status if upstream_error else None,
            "findings": len(findings),
            "upstream_attempts": len(material.trace.attempts) if material.trace else 0,
            "text_redacted": redact_text,
        },
        "gateway": {"version": __version__, "settings": settings_view(settings)},
        "client_request": {"headers": dict(material.client_headers), "body": client_stripped},
        "conversion": {
            "options": _options_view(material.options),
            "loop_policy": _loop_policy_view(material.loop_policy),
            "trim_policy": _trim_policy_view(material.trim_policy),
            "claude_messages": material.claude_message_count,
            "refused": guarded.refusal.message if guarded is not None and guarded.refusal else None,
            "findings": [finding_view(finding) for finding in findings],
            "normalized": record.fields if record else None,
            "debug_summary": (
                conversion_summary(
                    material.claude_message_count or 0, conversion, (*guarded.loop_findings, *guarded.invalid)
                )
                if conversion is not None and guarded is not None
                else None
            ),
        },
        "upstream_request": None
        if upstream_body is None
        else {
            "url": material.trace.sent_to if material.trace and material.trace.sent_to else None,
            "headers": {**FIXED_HEADERS, "Authorization": f"Bearer {REDACTED}"},
            "rebuilt_from_redacted_text": rebuilt,
            "body": upstream_body,
        },
        "upstream_attempts": [
            {
                "host": attempt.host,
                "account": attempt.account,
                "outcome": attempt.outcome,
                "status": attempt.status,
                "ms": round(attempt.seconds * 1000, 1),
            }
            for attempt in (material.trace.attempts if material.trace else ())
        ],
        "upstream_response": _upstream_response(upstream_error),
        "client_response": {
            "status": material.client_status,
            "error_type": material.client_error_type,
            "message": _client_message(material, guarded, rebuilt),
        },
        "timings": {
            name: None if value is None else round(value * 1000, 1) for name, value in material.timings.items()
        },
        "placeholders": [placeholder.as_dict() for placeholder in placeholders],
    }
    text = orjson.dumps(document, option=orjson.OPT_INDENT_2, default=str).decode()
    return scrub_secrets(text, known_secrets(settings)).encode()


def finding_view(finding: Finding) -> dict[str, Any]:
    return {
        "severity": str(finding.severity),
        "kind": str(finding.kind),
        "message_index": finding.message_index,
        "tool_use_id": finding.tool_use_id,
        "detail": finding.detail,
    }


def settings_view(settings: Settings) -> dict[str, Any]:
    """The settings as a capture shows them: every secret only as set or unset."""
    view: dict[str, Any] = {}
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if field.name == "api_keys":
            view[field.name] = f"{len(value)} key(s)"
        elif field.name in SECRET_FIELDS:
            view[field.name] = "set" if value else "unset"
        elif field.name == "profile_arn":
            view[field.name] = mask_profile_arn(value) if value else None
        elif isinstance(value, Path):
            view[field.name] = str(value)
        elif isinstance(value, Mapping):
            view[field.name] = dict(value)
        else:
            view[field.name] = value
    return view


def known_secrets(settings: Settings) -> list[str]:
    """Secret values the settings hold (each client key, the admin key, tokens, …)."""
    secrets: list[str] = []
    for name in SECRET_FIELDS:
        value = getattr(settings, name, None)
        if isinstance(value, tuple):
            secrets.extend(value)
        elif isinstance(value, str) and value:
            secrets.extend(part.strip() for part in value.split(",") if part.strip())
    return secrets


def _json_or_text(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", errors="replace")


def _without_user_id(body: Any) -> Any:
    """Claude Code's `metadata.user_id` names the user's account: removed (the conversation id derived from it is kept)."""
    metadata = body.get("metadata") if isinstance(body, dict) else None
    if isinstance(metadata, dict) and "user_id" in metadata:
        return {**body, "metadata": {**metadata, "user_id": REDACTED}}
    return body


def _with_masked_arn(body: dict[str, Any], material: CaptureMaterial) -> dict[str, Any]:
    arn = body.get("profileArn")
    if arn is None and material.trace is not None and material.trace.sent_body is not None:
        sent = orjson.loads(material.trace.sent_body)
        arn = sent.get("profileArn") if isinstance(sent, dict) else None
    if isinstance(arn, str):
        return {**body, "profileArn": mask_profile_arn(arn)}
    return body


def _rebuilt(material: CaptureMaterial, redacted_body: Any) -> tuple[GuardedConversion | None, Any]:
    """The pipeline run again on the redacted request, with the options of the original run."""
    if material.options is None:
        return None, None
    try:
        request = clamp_max_tokens(material.door.read(orjson.dumps(redacted_body)).request, material.options.model)
        guarded = convert_guarded(request, material.options, material.loop_policy, material.trim_policy)
    except AnthropicError:
        return None, None
    return guarded, guarded.conversion.payload if guarded.conversion is not None else None


def _client_message(material: CaptureMaterial, guarded: GuardedConversion | None, rebuilt: bool) -> str | None:
    """What the client was told; with text redaction, only what the redacted run would tell (a refusal
    quotes the start of tool inputs), else that it was left out."""
    if not rebuilt or material.client_message is None:
        return material.client_message
    if guarded is not None and guarded.refusal is not None:
        return guarded.refusal.message
    return "(left out: Q2API_CAPTURE_REDACT_TEXT is on)"


def _upstream_response(error: UpstreamHTTPError | None) -> dict[str, Any] | None:
    if error is None:
        return None
    return {
        "status": error.status,
        "request_id": error.request_id,
        "code": error.code,
        "reason": error.reason,
        "message": error.message,
        "body": error.body[:_UPSTREAM_BODY_CHARS].decode("utf-8", errors="replace"),
    }


def _options_view(options: ConversionOptions | None) -> dict[str, Any] | None:
    if options is None:
        return None
    model = options.model
    return {
        "conversation_id": options.conversation_id,
        "model": {
            "q_model_id": model.q_model_id,
            "context_window": model.context_window,
            "known": model.known,
            "input_types": sorted(model.input_types),
            "max_output_tokens": model.max_output_tokens,
        },
    }


def options_from_view(view: Mapping[str, Any]) -> ConversionOptions:
    model = view["model"]
    return ConversionOptions(
        conversation_id=str(view["conversation_id"]),
        model=ModelChoice(
            q_model_id=str(model["q_model_id"]),
            context_window=int(model["context_window"]),
            known=bool(model["known"]),
            input_types=frozenset(model.get("input_types") or ()),
            max_output_tokens=model.get("max_output_tokens"),
        ),
    )


def _loop_policy_view(policy: LoopPolicy) -> dict[str, Any]:
    return {"mode": str(policy.mode), "repetitions": policy.repetitions, "storm_calls": policy.storm_calls}


def loop_policy_from_view(view: Mapping[str, Any]) -> LoopPolicy:
    return LoopPolicy(LoopMode(view["mode"]), int(view["repetitions"]), int(view["storm_calls"]))


def _trim_policy_view(policy: TrimPolicy) -> dict[str, Any]:
    return {
        "mode": str(policy.mode),
        "max_body_bytes": policy.max_body_bytes,
        "max_history_messages": policy.max_history_messages,
    }


def trim_policy_from_view(view: Mapping[str, Any]) -> TrimPolicy:
    return TrimPolicy(TrimMode(view["mode"]), int(view["max_body_bytes"]), int(view["max_history_messages"]))


def finding_keys(findings: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, Any, Any]]:
    """What makes two findings the same for a replay: severity, kind, message and tool call (not the detail,
    which may name data a capture left out)."""
    keys = [(str(f["severity"]), str(f["kind"]), f.get("message_index"), f.get("tool_use_id")) for f in findings]
    return sorted(keys, key=lambda key: (key[0], key[1], key[2] is None, key[2] or 0, key[3] or ""))
