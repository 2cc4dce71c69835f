"""Text pieces: the fixed placeholders, documents and search results flattened to text,
and the per-message size limit.

Placeholders are short, neutral and explicit. They never read like an instruction such as
"continue" (a filler of that kind is one of the known causes of tool loops).
"""

from __future__ import annotations

import base64
import binascii

from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import (
    Base64DocumentSource,
    ContentDocumentSource,
    DocumentBlock,
    FileDocumentSource,
    ImageBlock,
    PlainTextDocumentSource,
    SearchResultBlock,
    TextBlock,
    URLDocumentSource,
)
from q2api.conversion.report import Finding, FindingKind

TOOL_RESULTS_ONLY = "(Tool results are attached.)"
IMAGES_ONLY = "(Images are attached.)"
EMPTY_USER_MESSAGE = "(empty message)"
EMPTY_ASSISTANT_MESSAGE = "(empty response)"
EMPTY_TOOL_RESULT = "(the tool returned no output)"
CONVERSATION_START = "(The conversation starts with an assistant message.)"
PREFILL_CONTINUATION = "(Continue your previous response exactly where it stopped, without repeating any of it.)"
CANCELLED_TOOL_RESULT = "Tool use was cancelled by the user"


class PromptTooLong(InvalidRequest):
    """A single text block that no Amazon Q message can hold. The message starts with
    `prompt is too long: N tokens > M maximum`, the wording Claude Code acts on."""

    def __init__(self, path: str, chars: int, limit: int) -> None:
        super().__init__(path, f"{chars} characters exceed the {limit}-character limit of one Amazon Q message")
        self.message = (
            f"prompt is too long: {-(-chars // 4)} tokens > {limit // 4} maximum "
            f"({path} holds {chars} characters; one Amazon Q message holds at most {limit})"
        )
        self.args = (self.message,)


def checked_text(text: str, limit: int, *path: str | int) -> str:
    """`text`, unless it is longer than one Amazon Q message can hold.

    The JSON path comes in parts (`"messages", 3, "content"`) and is joined only
    for the error: this runs for every text block of every request.
    """
    if len(text) > limit:
        raise PromptTooLong(".".join(map(str, path)), len(text), limit)
    return text


def search_result_text(block: SearchResultBlock) -> str:
    body = "\n".join(part.text for part in block.content if part.text)
    return f"[Search result: {block.title} ({block.source})]\n{body}"


def document_text(
    block: DocumentBlock,
    path: str,
    message_index: int,
    report: list[Finding],
) -> tuple[str, list[ImageBlock]]:
    """A document as labelled text, plus the images a content document carries.
    Sources with no text form (PDF, URL, file id) become an explicit, reported marker."""
    source = block.source
    label = f"[Document: {block.title}]" if block.title else "[Document]"
    if block.context:
        label = f"{label}\n(Context: {block.context})"
    images: list[ImageBlock] = []
    body: str | None = None
    if isinstance(source, PlainTextDocumentSource):
        body = source.data
    elif isinstance(source, ContentDocumentSource):
        if isinstance(source.content, str):
            body = source.content
        else:
            texts = []
            for part in source.content:
                if isinstance(part, TextBlock):
                    texts.append(part.text)
                else:
                    images.append(part)
            body = "\n\n".join(texts)
    elif isinstance(source, Base64DocumentSource) and source.media_type.startswith("text/"):
        try:
            body = base64.b64decode(source.data, validate=False).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            body = None
    if body is not None:
        report.append(Finding(FindingKind.DOCUMENT_AS_TEXT, message_index, detail=path))
        return f"{label}\n{body}", images
    if isinstance(source, URLDocumentSource):
        what = f"the document at {source.url} was not fetched (q2api does not fetch URLs)"
    elif isinstance(source, FileDocumentSource):
        what = f"file {source.file_id} is not available (the Files API is not supported)"
    else:
        what = f"its content ({getattr(source, 'media_type', 'structured content')}) cannot be forwarded to Amazon Q as text"
    report.append(Finding(FindingKind.DOCUMENT_OMITTED, message_index, detail=f"{path}: {what}"))
    return f"{label}\n(Document omitted: {what}.)", images
