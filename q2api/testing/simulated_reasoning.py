"""The simulator's native reasoning (docs/protocol.md#native-thinking): request fields, signed reasoning frames, replay checks.

Facts it follows: a model that reasons natively advertises `additionalModelRequestFieldsSchema`
in its catalogue entry, and the service checks the request's `additionalModelRequestFields`
against it (a property outside it: 400 `Invalid additionalModelRequestFields: property 'x' is
not defined in the schema`); reasoning comes back as `reasoningContentEvent` frames — text, then
the signature, possibly in fragments — or as `redactedContent`; history reasoning goes back as
`assistantResponseMessage.reasoningContent`, and a signature the service does not accept is a 400
with reason `THINKING_SIGNATURE_INVALID`, message ``Invalid `signature` in `thinking` block``.

Its own choices (not facts):

* a signature is `simsig.` + a digest of the reasoning text and the account it was made for, so
  the simulator can check it later (a signature of another account is refused, as peers report);
* `reject_signatures = True` refuses every history signature (the rejected-signature mode: e.g.
  a conversation that moved to another account);
* the reasoning text of its own replies is `Reasoning about: <the user's words>`, signed in
  `signature_fragments` pieces;
* the schema it gives models is the one JW quotes for claude-opus-4.6 (`adaptive`/`disabled`,
  `summarized`/`omitted`, efforts low…max, `max_tokens` 1024–64000).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import jsonschema

from q2api.testing import assumptions, scripts
from q2api.testing.assumptions import SIMULATOR
from q2api.testing.scripts import ErrorReply, Send

SIGNATURE_PREFIX = "simsig."
SIGNATURE_MESSAGE = "Invalid `signature` in `thinking` block"
SIGNATURE_REASON = "THINKING_SIGNATURE_INVALID"


def reasoning_schema(summary: tuple[str, ...], default_effort: str = "high") -> dict[str, Any]:
    """The `additionalModelRequestFieldsSchema` a summary of q2api.testing.assumptions describes: lines
    `path=a|b|c` (the values of an enum) or `path=low..high` (an integer range), `path` one or two names deep."""
    properties: dict[str, Any] = {}
    for line in summary:
        path, _, values = line.partition("=")
        if ".." in values:
            low, high = values.split("..", 1)
            leaf: dict[str, Any] = {"type": "integer", "minimum": int(low), "maximum": int(high)}
        else:
            leaf = {"enum": values.split("|")}
        outer, _, inner = path.partition(".")
        if not inner:
            properties[outer] = leaf
            continue
        if outer == "output_config" and inner == "effort":
            leaf["default"] = default_effort
        properties.setdefault(outer, {"type": "object", "properties": {}})["properties"][inner] = leaf
    return {"type": "object", "properties": properties, "additionalProperties": False}


# What claude-opus-4.6 advertises (JW `kiro/native_reasoning.py`), as q2api.testing.assumptions records it.
NATIVE_REASONING_SCHEMA: dict[str, Any] = reasoning_schema(SIMULATOR.names(assumptions.CATALOGUE_REASONING_SCHEMA))


def sign(text: str, account: str) -> str:
    digest = hashlib.sha256(f"{account}\n{text}".encode()).digest()
    return SIGNATURE_PREFIX + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def reasoning_frames(text: str, account: str, *, fragments: int = 2, chunks: int = 2) -> list[Send]:
    """Reasoning text frames, then its signature in `fragments` frames."""
    sends = [scripts.event("reasoningContentEvent", {"text": piece}) for piece in scripts.split_text(text, chunks)]
    sends += [
        scripts.event("reasoningContentEvent", {"signature": piece})
        for piece in scripts.split_text(sign(text, account), fragments)
    ]
    return sends


def redacted_frame(data: bytes = b"encrypted reasoning") -> Send:
    return scripts.event("reasoningContentEvent", {"redactedContent": base64.b64encode(data).decode()})


def signature_refused() -> ErrorReply:
    return scripts.http_error(400, "ValidationException", SIGNATURE_MESSAGE, reason=SIGNATURE_REASON)


def fields_refused(problem: str) -> ErrorReply:
    return scripts.http_error(
        400, "ValidationException", f"Invalid additionalModelRequestFields: {problem}", reason="REQUEST_BODY_INVALID"
    )


def wants_reasoning(body: Any) -> bool:
    """The request asks for native reasoning (a thinking type other than disabled, or an effort)."""
    fields = body.get("additionalModelRequestFields") if isinstance(body, dict) else None
    if not isinstance(fields, dict):
        return False
    thinking = fields.get("thinking")
    if isinstance(thinking, dict):
        return thinking.get("type") not in (None, "disabled")
    return isinstance(fields.get("reasoning"), dict)


class SimulatedReasoning:
    def __init__(self) -> None:
        # The rejected-signature mode (off: a signature the account made is accepted back, as assumed).
        self.reject_signatures = not SIMULATOR.flag(assumptions.REASONING_SIGNATURE_REPLAY_ACCEPTED)
        # Signature frames of the simulator's own reasoning (several, when the signature is assumed fragmented).
        self.signature_fragments = 3 if SIMULATOR.flag(assumptions.REASONING_SIGNATURE_FRAGMENTED) else 1

    def check(self, body: Any, schema: dict[str, Any] | None, account: str) -> ErrorReply | None:
        """The 400 the service gives this request, if any: fields outside the model's schema, a
        refused history signature."""
        if not isinstance(body, dict):
            return None
        fields = body.get("additionalModelRequestFields")
        if fields is not None:
            if schema is None:
                return fields_refused("the model takes no additional request fields")
            try:
                jsonschema.validate(fields, schema)
            except jsonschema.ValidationError as error:
                problem = (
                    f"property {error.path[-1]!r} is not defined in the schema"
                    if error.validator == "additionalProperties" and error.path
                    else error.message
                )
                return fields_refused(problem)
        for message in (body.get("conversationState") or {}).get("history") or ():
            reasoning = (message.get("assistantResponseMessage") or {}).get("reasoningContent")
            if not isinstance(reasoning, dict):
                continue
            if self.reject_signatures:
                return signature_refused()
            signed = reasoning.get("reasoningText")
            if isinstance(signed, dict):
                signature = signed.get("signature")
                if not signature or signature != sign(str(signed.get("text", "")), account):
                    return signature_refused()
        return None
