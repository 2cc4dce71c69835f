"""`DEBUG_MESSAGE_CONVERSION` output and redacted reproducer dumps. Pure: these functions
return text and dicts; the app decides where they go.

Image bytes and secrets never appear in anything returned here: images become a length
marker, secret-looking keys (tokens, keys, passwords, authorization, profile ARN) become
`<redacted>`. Texts are kept whole, since they are what a reproducer needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from q2api.conversion.options import Conversion
from q2api.conversion.report import Finding
from q2api.log_text import one_line

SUMMARY_HEADER = "=== Message Conversion Debug ==="
SUMMARY_FOOTER = "================================"
REDACTED = "<redacted>"
_SECRET_KEY_PARTS = ("token", "secret", "password", "authorization", "apikey", "api_key", "profilearn", "credential")


def conversion_summary(
    claude_message_count: int,
    conversion: Conversion,
    findings: Iterable[Finding] = (),
) -> str:
    """The summary of docs/troubleshooting.md#the-debug-summary, then one line per report finding and per extra (guard) finding."""
    history = conversion.history
    lines = [
        SUMMARY_HEADER,
        f"Input: {claude_message_count} Claude messages",
        f"Output: {len(history)} history messages + 1 current message",
    ]
    for position, entry in enumerate(history):
        if "userInputMessage" in entry:
            context = entry["userInputMessage"].get("userInputMessageContext") or {}
            lines.append(f"  History[{position}]: USER (toolResults: {bool(context.get('toolResults'))})")
        else:
            tool_uses = entry["assistantResponseMessage"].get("toolUses")
            lines.append(f"  History[{position}]: ASSISTANT (toolUses: {bool(tool_uses)})")
    lines.append(current_line(conversion))
    lines.append(SUMMARY_FOOTER)
    lines.extend(finding.line() for finding in (*conversion.report, *findings))
    return "\n".join(lines)


def current_line(conversion: Conversion) -> str:
    """`  Current: USER (toolResults: 2: toolu_05, toolu_06)`: the message the seed's lost results
    belonged to, with the ids of the results it carries (as sent to Amazon Q)."""
    current = conversion.payload["conversationState"]["currentMessage"]["userInputMessage"]
    results = (current.get("userInputMessageContext") or {}).get("toolResults") or ()
    ids = ", ".join(one_line(str(result.get("toolUseId"))) for result in results)
    return f"  Current: USER (toolResults: {len(results)}{': ' + ids if ids else ''})"


def redacted_payload(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The Amazon Q body with image bytes replaced by a length marker and secrets removed."""
    return cast(dict[str, Any], _redacted(payload))


def redacted_claude_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Claude request body (as parsed JSON) with base64 image/document data replaced by a
    length marker and secrets removed: a reproducer that is safe to attach to a bug report."""
    return cast(dict[str, Any], _redacted(body))


def _redacted(value: Any) -> Any:
    if isinstance(value, Mapping):
        if value.get("type") == "base64" and isinstance(value.get("data"), str):
            # An Anthropic base64 source (image or document).
            redacted = {k: _redacted_item(k, v) for k, v in value.items() if k != "data"}
            return {**redacted, "data": _length_marker(value["data"])}
        return {k: _redacted_item(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(item) for item in value]
    return value


def _redacted_item(key: str, value: Any) -> Any:
    lowered = key.lower()
    if key == "bytes" and isinstance(value, str | bytes):
        return _length_marker(value)
    if any(part in lowered for part in _SECRET_KEY_PARTS) and isinstance(value, str | bytes):
        return REDACTED
    return _redacted(value)


def _length_marker(data: str | bytes) -> str:
    return f"<{len(data)} base64 characters>"
