"""Claude Messages API request → Amazon Q `GenerateAssistantResponse` body. Pure, no I/O.

    conversion = convert_request(request, ConversionOptions(conversation_id=..., model=...))
    conversion.payload     # {"conversationState": {...}}, no nulls; the upstream client adds profileArn
    conversion.model       # ModelChoice(q_model_id, context_window, known)
    conversion.tool_names  # Amazon Q tool name -> client tool name, for every renamed tool
    conversion.report      # every merge, repair, drop and placeholder, as Finding records
    conversion.checkpoint  # where the conversation's next request can resume (`checkpoints`)

The steps, each in its own module under `q2api.conversion`:

1. `turns`: messages → alternating user / assistant turns (merging, system turns, tool-result
   matching, images, documents, thinking) — then framed so history starts with a user turn and
   the last turn, `currentMessage`, is a user turn. A final assistant turn (prefill) is kept as
   the last history message and the current message asks the model to continue it: Amazon Q
   cannot continue a partial answer, and dropping the prefill would lose what the client said.
2. `tool_results`: each user turn answers exactly the tool uses of the assistant turn before it.
3. `tool_specs`: the tools of the current message, covering every tool name used in history.
4. `system_context`: the system prompt as a stable synthetic first history pair.

Before any of it is assembled, `capabilities` refuses a part the model cannot take (an image
to a text-only model). Given a `checkpoints.Checkpoint` of an earlier request of the same
conversation, step 1 goes on from where that request's messages ended, and the history entries
of the turns it closed are reused: a resent history is converted once.

The output always passes `q2api.conversion.order_guard.validate_conversation`; a finding there
is a bug here.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, cast

import orjson

from q2api.amazonq.types import (
    CHAT_TRIGGER_MANUAL,
    AssistantResponseMessage,
    ChatMessage,
    ConversationState,
    UserInputMessage,
)
from q2api.anthropic.types import MessagesRequest
from q2api.conversion.capabilities import check_input_types
from q2api.conversion.checkpoints import Checkpoint, HistoryEntry, Settings
from q2api.conversion.identifiers import Identifiers
from q2api.conversion.images import select_images
from q2api.conversion.options import Conversion, ConversionOptions
from q2api.conversion.report import Finding, FindingKind
from q2api.conversion.system_context import context_pair, system_prompt_text
from q2api.conversion.text import EMPTY_ASSISTANT_MESSAGE, EMPTY_USER_MESSAGE, IMAGES_ONLY, TOOL_RESULTS_ONLY
from q2api.conversion.thinking_prompt import thinking_hint, with_hint
from q2api.conversion.tool_results import ToolResultDraft, answered_results, orphan_result_text
from q2api.conversion.tool_specs import tool_specs
from q2api.conversion.turns import AssistantTurn, Turn, TurnBuilder, UserTurn, frame_turns

__all__ = ["Conversion", "ConversionOptions", "convert_request", "session_conversation_id"]

_SESSION_IN_USER_ID = re.compile(r"session_(?P<id>[0-9a-fA-F-]{36})")
_CONVERSATION_NAMESPACE = uuid.UUID("6f0c1f36-3c39-4a49-9a64-0c0a8f2d6a51")


def convert_request(
    request: MessagesRequest, options: ConversionOptions, resume: Checkpoint | None = None
) -> Conversion:
    """`resume`: a checkpoint of an earlier request of this conversation whose messages this one
    starts with (`CheckpointStore.find`); the result is the same as without it, only cheaper."""
    report: list[Finding] = []
    model = options.model
    if not model.known:
        report.append(
            Finding(
                FindingKind.UNKNOWN_MODEL,
                detail=f"{request.model!r} is not in the model table; using {model.q_model_id!r}",
            )
        )

    settings: Settings = (options.max_message_chars, options.origin, options.max_images_per_message)
    if resume is not None and resume.settings != settings:
        resume = None
    builder_start = len(report)
    if resume is None:
        builder = TurnBuilder(Identifiers(report), options.max_message_chars, report)
    else:
        builder = resume.resumed_builder(report)
    first_new = len(resume.messages) if resume else 0
    for index in range(first_new, len(request.messages)):
        builder.add(index, request.messages[index])
    # What a checkpoint keeps of the builder, taken before framing and the tool list change it.
    builder_turns = tuple(builder.turns)
    builder_findings = tuple(report[builder_start:])
    builder_identifiers = builder.ids.copy([])
    turns = frame_turns(builder.turns, report)
    check_input_types(model, request.model, turns)

    context_sections: list[str] = []
    tools = tool_specs(
        request.tools, request.tool_choice, builder.history_tool_names, builder.ids, report, context_sections
    )
    system_text = system_prompt_text(request.system, options.max_message_chars)
    history = context_pair(system_text, context_sections, options.origin)
    if system_text:
        report.append(Finding(FindingKind.SYSTEM_PROMPT_AS_CONTEXT, detail="sent as the first history pair"))
    lead = 0 if turns[0] is builder_turns[0] else 1  # frame_turns put a user turn before an assistant one
    entries = _history_entries(turns[:-1], lead, resume.entries if resume else (), options, report)
    entries_at = len(history) + lead
    history.extend(entry[0] for entry in entries)

    current = _user_message(turns[-1], options, report)  # type: ignore[arg-type]  # frame_turns ends on a user turn
    hint = thinking_hint(request.thinking, options.default_thinking_budget)
    current["content"], hinted = with_hint(current["content"], hint)
    if hinted:
        report.append(Finding(FindingKind.THINKING_HINT, detail="thinking hint added to the current message"))
    if tools:
        current.setdefault("userInputMessageContext", {})["tools"] = tools
    current["modelId"] = model.q_model_id

    # Filled key by key so the body keeps Amazon Q's documented key order (docs/protocol.md#an-example-body).
    state = cast(ConversationState, {})
    if options.conversation_id:
        state["conversationId"] = options.conversation_id
    state["chatTriggerType"] = CHAT_TRIGGER_MANUAL
    if history:
        state["history"] = history
    state["currentMessage"] = {"userInputMessage": current}
    checkpoint = Checkpoint(
        # The converted messages stay those of the checkpoint resumed from, not this request's
        # copies of them: a conversation's checkpoints share one set however many turns it has.
        (*resume.messages, *request.messages[first_new:]) if resume else tuple(request.messages),
        settings,
        builder_turns,
        builder_findings,
        builder_identifiers,
        builder.history_tool_names,
        # Every builder turn but the last is closed: no later message can change its entry.
        tuple(entries[lead : lead + len(builder_turns) - 1]),
        entries_at,
    )
    return Conversion(
        {"conversationState": state},
        model,
        dict(builder.ids.tool_names),
        tuple(report),
        checkpoint,
        dict(builder.ids.tool_use_ids),
    )


def _history_entries(
    turns: list[Turn], lead: int, saved: tuple[HistoryEntry, ...], options: ConversionOptions, report: list[Finding]
) -> list[HistoryEntry]:
    """The history entry of each turn, in order. `saved` holds the entries of the first builder
    turns (the turns from `lead` on): each is reused, and what building it reported is reported again."""
    entries: list[HistoryEntry] = []
    for position, turn in enumerate(turns):
        if 0 <= position - lead < len(saved):
            entry = saved[position - lead]
            report.extend(entry[1])
        else:
            mark = len(report)
            message: ChatMessage = (
                {"userInputMessage": _user_message(turn, options, report)}
                if isinstance(turn, UserTurn)
                else {"assistantResponseMessage": _assistant_message(turn, report)}
            )
            entry = (message, tuple(report[mark:]))
        entries.append(entry)
    return entries


def session_conversation_id(request: MessagesRequest) -> str | None:
    """A conversation id that stays the same for every request of one client session, from
    Claude Code's `metadata.user_id` (a JSON string with `session_id`, or the older
    `user_…_account_…_session_<uuid>` form); None when the request carries no session."""
    user_id = (request.metadata or {}).get("user_id")
    if not isinstance(user_id, str) or not user_id:
        return None
    session: Any = None
    if user_id.startswith("{"):
        try:
            parsed = orjson.loads(user_id)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            session = parsed.get("session_id")
    else:
        match = _SESSION_IN_USER_ID.search(user_id)
        session = match["id"] if match else None
    if not isinstance(session, str) or not session:
        return None
    # A UUID derived from the session id: valid for Amazon Q (1..128 chars) and not the raw client value.
    return str(uuid.uuid5(_CONVERSATION_NAMESPACE, session))


def _user_message(turn: UserTurn, options: ConversionOptions, report: list[Finding]) -> UserInputMessage:
    selection = select_images(turn.images, options.max_images_per_message, report)
    images = selection.blocks
    results = answered_results(turn.expected, turn.results, selection, report)
    texts = [orphan_result_text(part, selection) if isinstance(part, ToolResultDraft) else part for part in turn.texts]
    content = "\n\n".join(texts)
    if not content or content.isspace():  # `not content.strip()`, without copying a long content
        content = TOOL_RESULTS_ONLY if results else IMAGES_ONLY if images else EMPTY_USER_MESSAGE
        report.append(
            Finding(
                FindingKind.EMPTY_CONTENT_PLACEHOLDER,
                turn.message_indices[0],
                detail=f"user content set to {content!r}",
            )
        )
    message: UserInputMessage = {"content": content}
    if results:
        message["userInputMessageContext"] = {"toolResults": results}
    message["origin"] = options.origin
    if images:
        message["images"] = images
    return message


def _assistant_message(turn: AssistantTurn, report: list[Finding]) -> AssistantResponseMessage:
    content = "\n\n".join(turn.texts)
    if not content and not turn.tool_uses:
        content = EMPTY_ASSISTANT_MESSAGE
        report.append(
            Finding(
                FindingKind.EMPTY_CONTENT_PLACEHOLDER,
                turn.message_indices[0],
                detail=f"assistant content set to {content!r}",
            )
        )
    message: AssistantResponseMessage = {"content": content}
    if turn.tool_uses:
        message["toolUses"] = turn.tool_uses
    return message
