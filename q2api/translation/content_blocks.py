"""The content-block half of the Claude stream grammar (docs/protocol.md#event-sequence,
docs/protocol.md#how-the-sdk-reacts-to-a-bad-stream).

`ContentBlocks` writes `content_block_start/delta/stop` events: indices are
0-based and consecutive, at most one block is open, a text block starts with
`"text": ""` and a thinking block with `"thinking": ""` and `"signature": ""`,
and a thinking block always gets a `signature_delta` before it stops. What to
write, and when, is the translator's business.

The upstream's signature may come in several `reasoningContentEvent` fragments
that only work joined (docs/protocol.md#native-thinking, kiro2cc-proxy #12): the fragments seen
while a thinking block is open (or before the next one opens) are concatenated.
Server-tool blocks (`server_tool_use`, `web_search_tool_result`) and citations
(`citations_delta` on a text block) are written here too.
"""

from __future__ import annotations

import base64
import hashlib
from enum import Enum
from typing import Any

from q2api.anthropic.events import (
    BlockDelta,
    ContentBlock,
    ContentBlockDeltaEvent,
    StreamEvent,
    WebSearchResult,
    WebSearchToolResultError,
)


class OpenBlock(Enum):
    NONE = "none"
    TEXT = "text"
    THINKING = "thinking"


class ContentBlocks:
    __slots__ = ("_held_space", "_pending_citations", "_signature", "_thinking_digest", "count", "index", "open")

    def __init__(self) -> None:
        self.open = OpenBlock.NONE
        self.count = 0  # blocks started so far
        self.index = -1  # index of the open (or last) block
        self._held_space = ""  # whitespace-only text waiting for a text block (see `text`)
        self._thinking_digest: Any = None
        self._signature: str | None = None  # the upstream's, for the open or next thinking block
        self._pending_citations: list[dict[str, Any]] = []  # for the next text block

    def text(self, text: str, out: list[StreamEvent]) -> None:
        if self.open is not OpenBlock.TEXT:
            if not text.strip():
                # No block for whitespace alone (the API rejects whitespace-only text blocks
                # in later requests): it waits for real text and is dropped otherwise.
                self._held_space += text
                return
            self._start({"type": "text", "text": ""}, out)
            self.open = OpenBlock.TEXT
            if self._held_space:
                text = self._held_space + text
                self._held_space = ""
            if self._pending_citations:
                for citation in self._pending_citations:
                    out.append(_delta(self.index, {"type": "citations_delta", "citation": citation}))
                self._pending_citations = []
        out.append(_delta(self.index, {"type": "text_delta", "text": text}))

    def thinking(self, text: str, out: list[StreamEvent]) -> None:
        if self.open is not OpenBlock.THINKING:
            self._start({"type": "thinking", "thinking": "", "signature": ""}, out)
            self.open = OpenBlock.THINKING
            self._thinking_digest = hashlib.sha256()
        self._thinking_digest.update(text.encode())
        out.append(_delta(self.index, {"type": "thinking_delta", "thinking": text}))

    def note_signature(self, signature: str) -> None:
        """A signature fragment of the open (or next) thinking block: fragments are joined."""
        self._signature = (self._signature or "") + signature

    def citation(self, citation: dict[str, Any], out: list[StreamEvent]) -> None:
        """A citation of the open text block, else of the next one."""
        if self.open is OpenBlock.TEXT:
            out.append(_delta(self.index, {"type": "citations_delta", "citation": citation}))
        else:
            self._pending_citations.append(citation)

    def server_tool_use(self, tool_use_id: str, name: str, input_json: str, out: list[StreamEvent]) -> None:
        """A whole server_tool_use block, its input in one delta (as the API streams tool input)."""
        self._start({"type": "server_tool_use", "id": tool_use_id, "name": name, "input": {}}, out)
        out.append(_delta(self.index, {"type": "input_json_delta", "partial_json": input_json}))
        out.append({"type": "content_block_stop", "index": self.index})

    def web_search_result(
        self, tool_use_id: str, content: list[WebSearchResult] | WebSearchToolResultError, out: list[StreamEvent]
    ) -> None:
        self._start({"type": "web_search_tool_result", "tool_use_id": tool_use_id, "content": content}, out)
        out.append({"type": "content_block_stop", "index": self.index})

    def compaction(self, summary: str | None, out: list[StreamEvent]) -> None:
        """A whole `compaction` block: its summary in one delta, as the API streams it."""
        self._start({"type": "compaction", "content": None}, out)
        out.append(_delta(self.index, {"type": "compaction_delta", "content": summary}))
        out.append({"type": "content_block_stop", "index": self.index})

    def redacted_thinking(self, data: str, out: list[StreamEvent]) -> None:
        self._start({"type": "redacted_thinking", "data": data}, out)
        out.append({"type": "content_block_stop", "index": self.index})

    def tool_use(self, tool_use_id: str, name: str, input_json: str, out: list[StreamEvent]) -> None:
        """A whole tool_use block: its input JSON, already validated, in one delta."""
        self._start({"type": "tool_use", "id": tool_use_id, "name": name, "input": {}}, out)
        out.append(_delta(self.index, {"type": "input_json_delta", "partial_json": input_json}))
        out.append({"type": "content_block_stop", "index": self.index})

    def close(self, out: list[StreamEvent]) -> None:
        if self.open is OpenBlock.NONE:
            return
        if self.open is OpenBlock.THINKING:
            out.append(_delta(self.index, {"type": "signature_delta", "signature": self._take_signature()}))
        out.append({"type": "content_block_stop", "index": self.index})
        self.open = OpenBlock.NONE

    def _start(self, block: ContentBlock, out: list[StreamEvent]) -> None:
        self.close(out)
        if block["type"] != "text":
            self._held_space = ""
        self.index = self.count
        self.count += 1
        out.append({"type": "content_block_start", "index": self.index, "content_block": block})

    def _take_signature(self) -> str:
        signature, self._signature = self._signature, None
        if signature:
            return signature
        # Deterministic and opaque: a digest of the thinking text, marked as ours.
        digest = self._thinking_digest.digest() if self._thinking_digest is not None else b""
        return "q2api." + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _delta(index: int, delta: BlockDelta) -> ContentBlockDeltaEvent:
    return {"type": "content_block_delta", "index": index, "delta": delta}
