"""Tool results: their content as Amazon Q text blocks, merged duplicates, orphans as labelled
text, and the answered list of a user turn ordered as the tool uses it answers.

Amazon Q requires every tool use of an assistant turn to be answered by the very next user
turn, and every toolResult there to answer one of them (docs/protocol.md#conversation-rules). A result lost on
the way is the classic cause of infinite tool loops: the model never sees the output and
calls the tool again. So nothing is dropped: unmatched results travel as text, unanswered
tool uses get the Amazon Q CLI's own "cancelled" error result.
"""

from __future__ import annotations

from dataclasses import dataclass

from q2api.amazonq.types import ToolResult, ToolResultContentBlock
from q2api.anthropic.types import (
    DocumentBlock,
    ImageBlock,
    SearchResultBlock,
    TextBlock,
    ToolReferenceBlock,
    ToolResultBlock,
)
from q2api.conversion.documents import document_text
from q2api.conversion.images import ImageSelection, TurnImage, q_image, tool_result_image_note
from q2api.conversion.report import Finding, FindingKind
from q2api.conversion.text import CANCELLED_TOOL_RESULT, EMPTY_TOOL_RESULT, checked_text, search_result_text

TextContent = list[ToolResultContentBlock]  # [{"text": ...}, ...]


@dataclass(slots=True)
class ToolResultDraft:
    q_id: str
    client_id: str
    message_index: int
    content: TextContent
    is_error: bool
    # Paths of the result's images: they travel in the message's `images`, and the note about
    # them is written once the message's images are chosen (the oldest may be dropped).
    image_paths: list[str]

    def text_with_image_note(self, selection: ImageSelection) -> TextContent:
        if not self.image_paths:
            return self.content
        return [*self.content, {"text": tool_result_image_note(self.image_paths, selection)}]


def tool_result_content(
    block: ToolResultBlock, message_index: int, position: int, limit: int, report: list[Finding]
) -> tuple[TextContent, list[TurnImage]]:
    """The result's content as text blocks, and its images (Q tool results cannot hold
    images: they move to the message's `images`, and a note in the result says which).
    `position` is the block's index in message `message_index` (paths are built on demand)."""
    content = block.content
    if content is None:
        return [], []
    if isinstance(content, str):
        if not content:
            return [], []
        return [{"text": checked_text(content, limit, "messages", message_index, "content", position, "content")}], []
    texts: TextContent = []
    images: list[TurnImage] = []
    for part_position, part in enumerate(content):
        if isinstance(part, TextBlock):
            if part.text:
                path = ("messages", message_index, "content", position, "content", part_position, "text")
                texts.append({"text": checked_text(part.text, limit, *path)})
            continue
        part_path = f"messages.{message_index}.content.{position}.content.{part_position}"
        if isinstance(part, ImageBlock):
            images.append(TurnImage(message_index, part_path, q_image(part, part_path, message_index, report)))
        elif isinstance(part, DocumentBlock):
            text, document_images = document_text(part, part_path, message_index, report)
            texts.append({"text": checked_text(text, limit, part_path)})
            images.extend(
                TurnImage(message_index, path, q_image(image, path, message_index, report))
                for path, image in document_images
            )
        elif isinstance(part, SearchResultBlock):
            texts.append({"text": checked_text(search_result_text(part), limit, part_path)})
        elif isinstance(part, ToolReferenceBlock):
            texts.append({"text": f"[Tool reference: {part.tool_name}]"})
    return texts, images


def orphan_result_text(draft: ToolResultDraft, selection: ImageSelection) -> str:
    status = "error" if draft.is_error else "success"
    body = "\n".join(part["text"] for part in draft.text_with_image_note(selection)) or EMPTY_TOOL_RESULT
    label = (
        f"[Result of an earlier tool call {draft.client_id} ({status}); its tool call is no longer in the conversation]"
    )
    return f"{label}\n{body}"


def answered_results(
    expected: dict[str, tuple[str, int]],
    received: dict[str, ToolResultDraft],
    selection: ImageSelection,
    report: list[Finding],
) -> list[ToolResult]:
    """One toolResult per expected tool use, in tool-use order."""
    if not expected:
        return []
    received_order = list(received)
    if received_order != [q_id for q_id in expected if q_id in received]:
        first = received[received_order[0]]
        report.append(
            Finding(
                FindingKind.TOOL_RESULTS_REORDERED,
                first.message_index,
                detail="ordered as the tool uses they answer",
            )
        )
    results: list[ToolResult] = []
    for q_id, (client_id, tool_use_index) in expected.items():
        draft = received.get(q_id)
        if draft is None:
            report.append(
                Finding(
                    FindingKind.CANCELLED_TOOL_RESULT,
                    tool_use_index,
                    client_id,
                    f"no tool_result came back; answered with {CANCELLED_TOOL_RESULT!r}",
                )
            )
            results.append({"toolUseId": q_id, "content": [{"text": CANCELLED_TOOL_RESULT}], "status": "error"})
            continue
        content = draft.text_with_image_note(selection)
        if not content:
            report.append(
                Finding(FindingKind.EMPTY_TOOL_RESULT, draft.message_index, client_id, "placeholder text sent")
            )
            content = [{"text": EMPTY_TOOL_RESULT}]
        results.append({"toolUseId": q_id, "content": content, "status": "error" if draft.is_error else "success"})
    return results
