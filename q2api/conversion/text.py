"""Text pieces: the fixed placeholders, search results flattened to text,
and the per-message size limit.

Placeholders are short, neutral and explicit. They never read like an instruction such as
"continue" (a filler of that kind is one of the known causes of tool loops).
"""

from __future__ import annotations

from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import SearchResultBlock

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
