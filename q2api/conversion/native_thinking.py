"""Claude's thinking request → Amazon Q's native reasoning fields, for models that take them. Pure.

A model whose catalogue entry advertises an `additionalModelRequestFieldsSchema`
(q2api.amazonq.reasoning_fields, docs/protocol.md#native-thinking) reasons natively: the request's
`thinking` (`enabled` with `budget_tokens`, `adaptive`, `disabled`, `display`) and
`output_config.effort` travel as top-level `additionalModelRequestFields`, built only from the
properties that schema declares (the service refuses any other). The reply's
`reasoningContentEvent` frames become `thinking` blocks with their signature
(q2api.translation.reply_text.ReplyText, with q2api.translation.content_blocks). Other
models keep the `<thinking_mode>` text hint (q2api.conversion.thinking_prompt): newer Opus models ignore it, hence this path.

Mapping, where the model does not take the requested form as it is:

* `enabled` + `budget_tokens` on a model that takes only `adaptive` → `adaptive`, with the budget
  as an effort (< 4,096 tokens `low`, < 16,384 `medium`, < 32,768 `high`, more `max`), mapped onto
  the model's levels (nearest, the higher one on a tie: JW `native_reasoning.clamp_effort`);
* `output_config.effort` (Claude) or the OpenAI door's `reasoning_effort` → the effort field the
  schema names (`output_config.effort`, or `reasoning.effort` for the GPT family);
* `max_tokens`, when the schema declares it, is the request's, kept inside the schema's range.

No thinking asked for (no `thinking`, no effort) sends nothing: the model's default applies.

History: a `thinking` block signed by the upstream goes back as
`assistantResponseMessage.reasoningContent.reasoningText {text, signature}` and a
`redacted_thinking` block as `reasoningContent.redactedContent` (docs/protocol.md#native-thinking), one per assistant
message (the field is not a list; later ones travel as text). Unsigned thinking, or thinking
signed by q2api itself (tag-convention replies, `q2api.` signatures), travels as text: unsigned
reasoning is refused upstream.
"""

from __future__ import annotations

from typing import Any

from q2api.amazonq.reasoning_fields import EffortField, ReasoningFields
from q2api.amazonq.types import ReasoningContent
from q2api.anthropic.types import MessagesRequest, ThinkingConfig

# Signatures q2api makes for thinking it split out of text (q2api.translation.content_blocks):
# they were never the upstream's, so they never go back as native reasoning.
LOCAL_SIGNATURE_PREFIX = "q2api."
_BUDGET_EFFORTS = ((4096, "low"), (16384, "medium"), (32768, "high"))


def native_reasoning(fields: ReasoningFields | None) -> bool:
    """The model reasons natively (its thinking goes as request fields, not as a text hint)."""
    return fields is not None and fields.native


def reasoning_request_fields(request: MessagesRequest, fields: ReasoningFields) -> dict[str, Any] | None:
    """`additionalModelRequestFields` for `request` on a model with these `fields`; None when the
    request asks for no thinking (or for nothing the model takes)."""
    thinking = request.thinking
    effort_asked = request.output_config.effort if request.output_config is not None else None
    if thinking is None and effort_asked is None:
        return None
    out: dict[str, Any] = {}
    if thinking is not None and not thinking.enabled:
        if thinking.type in fields.thinking_types:
            out["thinking"] = {"type": thinking.type}
        return out or None
    if effort_asked is None and thinking is not None and thinking.budget_tokens:
        effort_asked = _budget_effort(thinking.budget_tokens)
    thinking_object = _thinking_object(thinking, fields)
    if thinking_object is not None:
        out["thinking"] = thinking_object
        if thinking_object["type"] == "enabled" and "budget_tokens" in thinking_object:
            effort_asked = request.output_config.effort if request.output_config is not None else None
    effort = fields.effort(effort_asked)
    if effort is not None and fields.effort_field is not None:
        out[fields.effort_field.value] = {"effort": effort}
    elif fields.effort_field is EffortField.REASONING and fields.default_effort:
        out["reasoning"] = {"effort": fields.default_effort}
    if fields.max_tokens_range is not None and out:
        low, high = fields.max_tokens_range
        out["max_tokens"] = min(max(request.max_tokens, low), high)
    return out or None


def _thinking_object(thinking: ThinkingConfig | None, fields: ReasoningFields) -> dict[str, Any] | None:
    types = fields.thinking_types
    if not types or thinking is None:
        return None  # an effort alone does not turn thinking on
    wanted = thinking.type
    if wanted in types:
        kind = wanted
    elif "adaptive" in types:
        kind = "adaptive"
    elif "enabled" in types:
        kind = "enabled"
    else:
        return None
    chosen: dict[str, Any] = {"type": kind}
    if (
        kind == "enabled"
        and thinking is not None
        and thinking.budget_tokens
        and "budget_tokens" in fields.thinking_keys
    ):
        chosen["budget_tokens"] = thinking.budget_tokens
    if thinking is not None and thinking.display in fields.displays:
        chosen["display"] = thinking.display
    return chosen


def _budget_effort(budget: int) -> str:
    for ceiling, effort in _BUDGET_EFFORTS:
        if budget < ceiling:
            return effort
    return "max"


def signed_reasoning(text: str, signature: str | None) -> ReasoningContent | None:
    """A history thinking block as native reasoning, if it carries an upstream signature."""
    if not signature or signature.startswith(LOCAL_SIGNATURE_PREFIX):
        return None
    return {"reasoningText": {"text": text, "signature": signature}}


def without_reasoning(payload: dict[str, Any]) -> dict[str, Any] | None:
    """`payload` with every history `reasoningContent` removed, for the one retry after Amazon Q
    refused a signature (THINKING_SIGNATURE_INVALID; peers "drop reasoningContent from every history
    assistant message and resend once"); None when there is none to remove. The history messages
    are copied, never changed (they may be shared with conversion checkpoints)."""
    state = payload["conversationState"]
    history = state.get("history") or []
    if not any("reasoningContent" in message.get("assistantResponseMessage", {}) for message in history):
        return None
    stripped = [
        {
            "assistantResponseMessage": {
                key: value for key, value in message["assistantResponseMessage"].items() if key != "reasoningContent"
            }
        }
        if "reasoningContent" in message.get("assistantResponseMessage", {})
        else message
        for message in history
    ]
    return {**payload, "conversationState": {**state, "history": stripped}}
