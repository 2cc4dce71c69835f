"""Claude Messages API request → Amazon Q `GenerateAssistantResponse` body. Pure, no I/O.

The conversion's public face: `convert_claude_request` converts a whole request, and
`merge_user_messages` is its step that folds consecutive user messages into one
`userInputMessage` (where gateways that lose tool results go wrong; see
TROUBLESHOOTING_INFINITE_LOOP.md).

    conversion = convert_claude_request(request, ConversionOptions(conversation_id=..., model=...))
    conversion.payload     # {"conversationState": {...}}, no nulls; the upstream client adds profileArn
    conversion.model       # ModelChoice(q_model_id, context_window, known)
    conversion.tool_names  # Amazon Q tool name -> client tool name, for every renamed tool
    conversion.report      # every merge, repair, drop and placeholder, as Finding records
    conversion.checkpoint  # where the conversation's next request can resume (`checkpoints`)

The steps, each in its own module under `q2api.conversion`:

1. `turns`: messages → alternating user / assistant turns (consecutive messages of one role
   gathered into one turn, system turns, tool-result matching, images, documents, thinking) —
   then framed so history starts with a user turn and the last turn, `currentMessage`, is a user
   turn. A final assistant turn (prefill) is kept as the last history message and the current
   message asks the model to continue it: Amazon Q cannot continue a partial answer, and
   dropping the prefill would lose what the client said. Each user turn then becomes one
   `userInputMessage` by `merge_user_messages` (below).
2. `tool_results`: each user turn answers exactly the tool uses of the assistant turn before it.
3. `tool_specs`: the tools of the current message, covering every tool name used in history.
4. `system_context`: the system prompt as a stable synthetic first history pair.
5. `native_thinking`: for a model that reasons natively, the thinking request as
   `additionalModelRequestFields` (and signed thinking in history as `reasoningContent`);
   for the others, `thinking_prompt`'s text hint.

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
    GenerateAssistantResponseRequest,
    UserInputMessage,
)
from q2api.anthropic.types import MessagesRequest
from q2api.conversion.capabilities import check_input_types
from q2api.conversion.checkpoints import Checkpoint, HistoryEntry, Settings
from q2api.conversion.identifiers import Identifiers
from q2api.conversion.images import select_images
from q2api.conversion.native_thinking import native_reasoning, reasoning_request_fields
from q2api.conversion.options import Conversion, ConversionOptions
from q2api.conversion.report import Finding, FindingKind
from q2api.conversion.system_context import context_pair, system_prompt_text
from q2api.conversion.text import EMPTY_ASSISTANT_MESSAGE, EMPTY_USER_MESSAGE, IMAGES_ONLY, TOOL_RESULTS_ONLY
from q2api.conversion.thinking_prompt import thinking_hint, with_hint
from q2api.conversion.tool_results import ToolResultDraft, answered_results, orphan_result_text
from q2api.conversion.tool_specs import tool_choice_instruction, tool_specs
from q2api.conversion.turns import AssistantTurn, Turn, TurnBuilder, UserTurn, frame_turns
from q2api.conversion.web_search import web_search_options

__all__ = [
    "Conversion",
    "ConversionOptions",
    "convert_claude_request",
    "merge_user_messages",
    "session_conversation_id",
]

_SESSION_IN_USER_ID = re.compile(r"session_(?P<id>[0-9a-fA-F-]{36})")
_CONVERSATION_NAMESPACE = uuid.UUID("6f0c1f36-3c39-4a49-9a64-0c0a8f2d6a51")


def convert_claude_request(
    request: MessagesRequest, options: ConversionOptions, resume: Checkpoint | None = None
) -> Conversion:
    """The Amazon Q request for `request`, with the report of everything the conversion changed.

    Guarantees: the payload passes `order_guard.validate_conversation` (history alternates user /
    assistant from a user turn, every tool use is answered by the next user message, no null);
    every text, tool result and image the client sent is in it or named in `report` with the
    reason it is not (an image over the per-message cap, a server block with no Amazon Q form).
    Bad input raises `InvalidRequest` naming the field.

    `resume`: a checkpoint of an earlier request of this conversation whose messages this one
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

    native = native_reasoning(model.reasoning)
    settings: Settings = (options.max_message_chars, options.origin, options.max_images_per_message, native)
    if resume is not None and resume.settings != settings:
        resume = None
    builder_start = len(report)
    if resume is None:
        builder = TurnBuilder(Identifiers(report), options.max_message_chars, report, native_reasoning=native)
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

    web_search = web_search_options(request) if request.tools else None
    if web_search is not None and request.tool_choice is not None and request.tool_choice.type == "none":
        web_search = None  # tool_choice none offers no tool, server tools included
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

    current = merge_user_messages(turns[-1], options, report)  # type: ignore[arg-type]  # frame_turns ends on a user turn
    reasoning_fields = reasoning_request_fields(request, model.reasoning) if native and model.reasoning else None
    if reasoning_fields is not None:
        report.append(Finding(FindingKind.NATIVE_THINKING, detail=f"additionalModelRequestFields {reasoning_fields}"))
    elif not native:
        hint = thinking_hint(request.thinking, options.default_thinking_budget)
        current["content"], hinted = with_hint(current["content"], hint)
        if hinted:
            report.append(Finding(FindingKind.THINKING_HINT, detail="thinking hint added to the current message"))
    if tools:
        current.setdefault("userInputMessageContext", {})["tools"] = tools
        asked = tool_choice_instruction(request.tool_choice)
        if asked is not None:
            current["content"] = f"{current['content']}\n\n{asked}"
    current["modelId"] = model.q_model_id

    # Filled key by key so the body keeps Amazon Q's documented key order (docs/protocol.md#an-example-body).
    state = cast(ConversationState, {})
    if options.conversation_id:
        state["conversationId"] = options.conversation_id
    state["chatTriggerType"] = CHAT_TRIGGER_MANUAL
    if history:
        state["history"] = history
    state["currentMessage"] = {"userInputMessage": current}
    payload: GenerateAssistantResponseRequest = {"conversationState": state}
    if reasoning_fields is not None:
        payload["additionalModelRequestFields"] = reasoning_fields
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
        payload,
        model,
        dict(builder.ids.tool_names),
        tuple(report),
        checkpoint,
        tool_use_ids=dict(builder.ids.tool_use_ids),
        turn_messages=tuple(turn.message_indices for turn in turns),
        turns_at=entries_at - lead,
        web_search=web_search,
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
                {"userInputMessage": merge_user_messages(turn, options, report)}
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


def merge_user_messages(turn: UserTurn, options: ConversionOptions, report: list[Finding]) -> UserInputMessage:
    """One `userInputMessage` from the consecutive user messages `turn` gathered (`TurnBuilder`
    puts every user message that follows another user message into the same turn).

    Guarantees, for all of those messages together:
    - every tool_result is carried: one `toolResult` per tool use of the assistant turn before,
      in that turn's order, holding the content of every result given for it (the same
      `tool_use_id` twice is one result, error status wins; a call with no result gets a
      cancelled error result); a result whose call is not in that turn is labelled text, never dropped;
    - every text block is in `content`, in message order, joined by blank lines; a message of
      tool results or images alone gets a neutral placeholder, never an instruction;
    - every image is in `images`, up to the per-message cap; each one past it is reported.
    Each such change is a `Finding` appended to `report`."""
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
    if turn.reasoning is not None:
        message["reasoningContent"] = turn.reasoning
    return message
