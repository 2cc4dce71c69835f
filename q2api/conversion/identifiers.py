"""Tool names and tool-use ids that Amazon Q accepts, derived reversibly from the client's.

Amazon Q allows 1..64 characters of `[a-zA-Z0-9_-]` for both (docs/protocol.md#request-body); MCP tools are
routinely longer (`mcp__server__some_long_tool_name`) or contain dots. A valid name is kept as
is; any other becomes a readable prefix plus a short hash of the full original. The hash makes
the result deterministic — the same name maps to the same Q name on every turn, so the history
of one request matches the tools of the next — and keeps two similar names apart.
"""

from __future__ import annotations

import hashlib
import re

from q2api.amazonq.types import IDENTIFIER_PATTERN, MAX_TOOL_NAME_LENGTH
from q2api.conversion.report import Finding, FindingKind

_INVALID_CHARACTERS = re.compile(r"[^a-zA-Z0-9_-]")


def shortened_identifier(original: str, hash_length: int = 8) -> str:
    digest = hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:hash_length]
    prefix = _INVALID_CHARACTERS.sub("_", original)[: MAX_TOOL_NAME_LENGTH - hash_length - 1]
    return f"{prefix or 'id'}_{digest}"


def is_valid_identifier(name: str) -> bool:
    return IDENTIFIER_PATTERN.fullmatch(name) is not None


class Identifiers:
    """Maps the client's tool names and tool-use ids to Amazon Q ones for one conversion,
    reporting each change once. `tool_names` and `tool_use_ids` are the reverse maps the
    response path needs.

    Every tool call gets an id of its own: a client that reuses one (`call_0` on every turn, as
    some OpenAI-style clients do, or the same id twice in one turn) has the later call sent under
    a fresh id — the id's readable prefix, the occurrence, and a hash — and its result follows it
    (`q2api.conversion.turns` pairs results with the calls of the turn before them)."""

    __slots__ = ("_call_ids", "_ids", "_names", "_report", "tool_names", "tool_use_ids")

    def __init__(self, report: list[Finding]) -> None:
        self.tool_names: dict[str, str] = {}  # Q name -> original name (changed names only)
        self.tool_use_ids: dict[str, str] = {}  # Q id -> original id (changed ids only)
        self._names: dict[str, str] = {}  # original -> Q name
        self._ids: dict[str, str] = {}
        self._call_ids: set[str] = set()  # Q ids already given to a tool call
        self._report = report

    def copy(self, report: list[Finding]) -> Identifiers:
        """The same maps, reporting into `report` from now on; changes to either leave the other as it is."""
        copy = Identifiers(report)
        copy.tool_names.update(self.tool_names)
        copy.tool_use_ids.update(self.tool_use_ids)
        copy._names.update(self._names)
        copy._ids.update(self._ids)
        copy._call_ids.update(self._call_ids)
        return copy

    def tool_name(self, original: str) -> str:
        known = self._names.get(original)
        if known is not None:
            return known
        if is_valid_identifier(original):
            q_name = original
        else:
            q_name = shortened_identifier(original)
            if self.tool_names.get(q_name, original) != original:  # a hash collision: lengthen
                q_name = shortened_identifier(original, 16)
            self.tool_names[q_name] = original
            self._report.append(
                Finding(
                    FindingKind.TOOL_RENAMED,
                    detail=f"{original!r} -> {q_name!r} (Amazon Q allows 64 chars of [a-zA-Z0-9_-])",
                )
            )
        self._names[original] = q_name
        return q_name

    def tool_use_id(self, original: str, message_index: int) -> str:
        known = self._ids.get(original)
        if known is not None:
            return known
        q_id = original if is_valid_identifier(original) else shortened_identifier(original)
        if q_id != original:
            self._report.append(
                Finding(FindingKind.TOOL_USE_ID_RENAMED, message_index, original, f"sent upstream as {q_id!r}")
            )
            self.tool_use_ids[q_id] = original
        self._ids[original] = q_id
        return q_id

    def tool_call_id(self, original: str, message_index: int) -> str:
        """The Amazon Q id of a tool call: `tool_use_id(original)`, unless an earlier call has it."""
        q_id = self.tool_use_id(original, message_index)
        if q_id in self._call_ids:
            occurrence = 2
            while (fresh := shortened_identifier(f"{original}#{occurrence}")) in self._call_ids:
                occurrence += 1
            self._report.append(
                Finding(
                    FindingKind.DUPLICATE_TOOL_USE_ID,
                    message_index,
                    original,
                    f"an earlier tool call has this id; sent upstream as {fresh!r}, with its result",
                )
            )
            self.tool_use_ids[fresh] = original
            q_id = fresh
        self._call_ids.add(q_id)
        return q_id
