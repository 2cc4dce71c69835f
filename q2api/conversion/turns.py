"""Claude messages → strictly alternating user / assistant turns.

Consecutive turns of one role merge into one (Anthropic itself combines them; Amazon Q rejects
them): every text block is kept in order, **every** tool_result is kept, tool uses are
concatenated. `role: "system"` turns become labelled context inside the user turn they sit in
(see `system_context`). Each user turn remembers the tool uses of the assistant turn before it,
so tool results are matched at the moment they are read: a result whose tool use is not there
(compacted away, or out of order) becomes labelled text instead of an invalid toolResult.

The framing rules (first turn user, last turn user) are applied afterwards by `frame_turns`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from q2api.amazonq.types import ToolUse
from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import (
    SERVER_TOOL_RESULT_BLOCKS,
    ContainerUploadBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    SearchResultBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from q2api.conversion.documents import document_text
from q2api.conversion.identifiers import Identifiers
from q2api.conversion.images import TurnImage, q_image
from q2api.conversion.json_clean import cleaned_tool_input
from q2api.conversion.report import Finding, FindingKind
from q2api.conversion.system_context import system_turn_text
from q2api.conversion.text import (
    CONVERSATION_START,
    PREFILL_CONTINUATION,
    checked_text,
    search_result_text,
)
from q2api.conversion.thinking_prompt import thinking_as_text
from q2api.conversion.tool_results import ToolResultDraft, tool_result_content

_SERVER_BLOCKS = (ServerToolUseBlock, ContainerUploadBlock, *SERVER_TOOL_RESULT_BLOCKS)

# A tool use as the next user turn must answer it: Q id -> (client id, message index).
ExpectedResults = dict[str, tuple[str, int]]


@dataclass(slots=True)
class UserTurn:
    message_indices: list[int]
    expected: ExpectedResults
    # Text in order; a ToolResultDraft here is an orphan result, written as labelled text once
    # the message's images are chosen (its note says which of its images were sent).
    texts: list[str | ToolResultDraft] = field(default_factory=list)
    results: dict[str, ToolResultDraft] = field(default_factory=dict)
    images: list[TurnImage] = field(default_factory=list)

    def reopened(self) -> UserTurn:
        """A copy the builder may go on filling, leaving this one as it is. An orphan result
        in `texts` is never changed once written; a matched one can still take a duplicate."""
        results = {
            q_id: replace(draft, content=list(draft.content), image_paths=list(draft.image_paths))
            for q_id, draft in self.results.items()
        }
        return UserTurn(list(self.message_indices), self.expected, list(self.texts), results, list(self.images))


@dataclass(slots=True)
class AssistantTurn:
    message_indices: list[int]
    texts: list[str] = field(default_factory=list)
    tool_uses: list[ToolUse] = field(default_factory=list)
    tool_use_origins: ExpectedResults = field(default_factory=dict)

    def reopened(self) -> AssistantTurn:
        """A copy the builder may go on filling, leaving this one as it is."""
        return AssistantTurn(
            list(self.message_indices), list(self.texts), list(self.tool_uses), dict(self.tool_use_origins)
        )


Turn = UserTurn | AssistantTurn


@dataclass(slots=True)
class TurnBuilder:
    ids: Identifiers
    text_limit: int
    report: list[Finding]
    turns: list[Turn] = field(default_factory=list)
    # Q tool name -> client tool name, for every tool used in history (in order of first use).
    history_tool_names: dict[str, str] = field(default_factory=dict)

    def add(self, index: int, message: Message) -> None:
        if message.role == "assistant":
            self._add_assistant(index, message)
        elif message.role == "user":
            self._add_user(index, message)
        else:
            self._add_system(index, message)

    # ------------------------------------------------------------ turns

    def _user_turn(self, index: int) -> UserTurn:
        last = self.turns[-1] if self.turns else None
        if isinstance(last, UserTurn):
            last.message_indices.append(index)
            return last
        expected = last.tool_use_origins if isinstance(last, AssistantTurn) else {}
        turn = UserTurn([index], expected)
        self.turns.append(turn)
        return turn

    def _assistant_turn(self, index: int) -> AssistantTurn:
        last = self.turns[-1] if self.turns else None
        if isinstance(last, AssistantTurn):
            last.message_indices.append(index)
            self.report.append(
                Finding(
                    FindingKind.MERGED_ASSISTANT_TURN,
                    index,
                    detail=f"merged into the assistant turn of message {last.message_indices[0]}",
                )
            )
            return last
        turn = AssistantTurn([index])
        self.turns.append(turn)
        return turn

    # ------------------------------------------------------------ roles

    def _add_system(self, index: int, message: Message) -> None:
        content = message.content
        if isinstance(content, str):
            text = checked_text(content, self.text_limit, "messages", index, "content")
        else:
            parts = []
            for position, block in enumerate(content or ()):
                path = f"messages.{index}.content.{position}"
                if not isinstance(block, TextBlock):
                    raise InvalidRequest(f"{path}.type", "system messages may only hold text blocks")
                parts.append(checked_text(block.text, self.text_limit, path, "text"))
            text = "\n\n".join(part for part in parts if part)
        if not text.strip():
            self.report.append(Finding(FindingKind.EMPTY_SYSTEM_TURN_DROPPED, index))
            return
        turn = self._user_turn(index)
        turn.texts.append(system_turn_text(text))
        self.report.append(
            Finding(
                FindingKind.SYSTEM_TURN_AS_CONTEXT,
                index,
                detail=f"labelled context in the user turn of message {turn.message_indices[0]}",
            )
        )

    def _add_user(self, index: int, message: Message) -> None:
        turn = self._user_turn(index)
        if len(turn.message_indices) > 1:
            self.report.append(
                Finding(
                    FindingKind.MERGED_USER_TURN,
                    index,
                    detail=f"merged into the user turn of message {turn.message_indices[0]}",
                )
            )
        for position, block in enumerate(self._blocks_after_plain_text(turn, index, message.content)):
            # Paths are built only where they are used: this loop runs for every block of every request.
            if isinstance(block, TextBlock):
                self._add_block_text(turn, index, position, block.text)
                continue
            if isinstance(block, ToolResultBlock):
                self._add_tool_result(turn, index, position, block)
                continue
            path = f"messages.{index}.content.{position}"
            if isinstance(block, ImageBlock):
                turn.images.append(TurnImage(index, path, q_image(block, path, index, self.report)))
            elif isinstance(block, DocumentBlock):
                text, images = document_text(block, path, index, self.report)
                turn.texts.append(checked_text(text, self.text_limit, path))
                turn.images.extend(
                    TurnImage(index, where, q_image(image, where, index, self.report)) for where, image in images
                )
            elif isinstance(block, SearchResultBlock):
                turn.texts.append(checked_text(search_result_text(block), self.text_limit, path))
            elif isinstance(block, _SERVER_BLOCKS):
                self._drop_server_block(index, block, path)
            else:
                raise InvalidRequest(f"{path}.type", f"{_tag(block)!r} blocks are not allowed in user messages")

    def _blocks_after_plain_text(self, turn: UserTurn | AssistantTurn, index: int, content: object) -> Sequence[Any]:
        """String content goes straight into the turn's texts (no blocks left); block content is returned."""
        if isinstance(content, str):
            if content:
                turn.texts.append(checked_text(content, self.text_limit, "messages", index, "content"))
            return ()
        return content or ()  # type: ignore[return-value]

    def _add_block_text(self, turn: UserTurn | AssistantTurn, index: int, position: int, text: str) -> None:
        if text:
            turn.texts.append(checked_text(text, self.text_limit, "messages", index, "content", position, "text"))

    def _add_tool_result(self, turn: UserTurn, index: int, position: int, block: ToolResultBlock) -> None:
        q_id = _answered_call(turn, block.tool_use_id)
        content, images = tool_result_content(block, index, position, self.text_limit, self.report)
        turn.images.extend(images)
        image_paths = [image.path for image in images]
        is_error = bool(block.is_error)
        if q_id is None:
            q_id = self.ids.tool_use_id(block.tool_use_id, index)
            turn.texts.append(ToolResultDraft(q_id, block.tool_use_id, index, content, is_error, image_paths))
            self.report.append(
                Finding(
                    FindingKind.ORPHAN_TOOL_RESULT,
                    index,
                    block.tool_use_id,
                    "its tool_use is not in the preceding assistant turn; sent as labelled text",
                )
            )
            return
        draft = turn.results.get(q_id)
        if draft is None:
            turn.results[q_id] = ToolResultDraft(q_id, block.tool_use_id, index, content, is_error, image_paths)
            return
        draft.content.extend(content)
        draft.image_paths.extend(image_paths)
        draft.is_error = draft.is_error or is_error
        self.report.append(
            Finding(
                FindingKind.DUPLICATE_TOOL_RESULT_MERGED,
                index,
                block.tool_use_id,
                "contents merged, error status wins",
            )
        )

    def _add_assistant(self, index: int, message: Message) -> None:
        turn = self._assistant_turn(index)
        for position, block in enumerate(self._blocks_after_plain_text(turn, index, message.content)):
            if isinstance(block, TextBlock):
                self._add_block_text(turn, index, position, block.text)
                continue
            if isinstance(block, ToolUseBlock):
                self._add_tool_use(turn, index, block)
                continue
            path = f"messages.{index}.content.{position}"
            if isinstance(block, ThinkingBlock):
                if block.thinking:
                    thinking = checked_text(block.thinking, self.text_limit, path, "thinking")
                    turn.texts.append(thinking_as_text(thinking))
                    self.report.append(Finding(FindingKind.THINKING_AS_TEXT, index, detail=path))
            elif isinstance(block, RedactedThinkingBlock):
                self.report.append(
                    Finding(
                        FindingKind.REDACTED_THINKING_DROPPED,
                        index,
                        detail=f"{path}: encrypted reasoning has no Amazon Q form",
                    )
                )
            elif isinstance(block, _SERVER_BLOCKS):
                self._drop_server_block(index, block, path)
            else:
                raise InvalidRequest(f"{path}.type", f"{_tag(block)!r} blocks are not allowed in assistant messages")

    def _add_tool_use(self, turn: AssistantTurn, index: int, block: ToolUseBlock) -> None:
        q_id = self.ids.tool_call_id(block.id, index)  # a fresh id when an earlier call has this one
        name = self.ids.tool_name(block.name)
        self.history_tool_names.setdefault(name, block.name)
        tool_input, repaired = cleaned_tool_input(block.input)
        if repaired:
            self.report.append(
                Finding(FindingKind.TOOL_INPUT_REPAIRED, index, block.id, "null values and empty-string keys removed")
            )
        turn.tool_uses.append({"toolUseId": q_id, "name": name, "input": tool_input})
        turn.tool_use_origins[q_id] = (block.id, index)

    def _drop_server_block(self, index: int, block: Any, path: str) -> None:
        self.report.append(
            Finding(
                FindingKind.SERVER_BLOCK_DROPPED,
                index,
                getattr(block, "tool_use_id", None) or getattr(block, "id", None),
                f"{path}: {_tag(block)} is an Anthropic server-side artefact with no Amazon Q form",
            )
        )


def _answered_call(turn: UserTurn, client_id: str) -> str | None:
    """The Amazon Q id of the call of the turn before that a result with `client_id` answers: the
    first such call still without a result (a client may give two calls one id), else the last one
    (the result is a duplicate, merged into that call's). None: no call of that turn has the id."""
    answered = None
    for q_id, (call_client_id, _) in turn.expected.items():
        if call_client_id == client_id:
            if q_id not in turn.results:
                return q_id
            answered = q_id
    return answered


def _tag(block: Any) -> str:
    return str(block.__struct_config__.tag)


def frame_turns(turns: list[Turn], report: list[Finding]) -> list[Turn]:
    """First turn user, last turn user (it becomes `currentMessage`): a conversation that opens
    with an assistant turn gets a neutral opening user turn; a final assistant turn (prefill)
    stays in history and a synthetic user turn asks the model to continue it."""
    if not turns:
        raise InvalidRequest("messages", "the request holds no user or assistant content")
    if isinstance(turns[0], AssistantTurn):
        report.append(
            Finding(
                FindingKind.LEADING_ASSISTANT_TURN,
                turns[0].message_indices[0],
                detail="a user turn was added before it",
            )
        )
        turns.insert(0, UserTurn([], {}, texts=[CONVERSATION_START]))
    last = turns[-1]
    if isinstance(last, AssistantTurn):
        report.append(
            Finding(
                FindingKind.PREFILL,
                last.message_indices[-1],
                detail="the final assistant turn stays in history; the current message asks the model to continue it",
            )
        )
        turns.append(UserTurn([], last.tool_use_origins, texts=[PREFILL_CONTINUATION]))
    return turns
