"""Anthropic-defined client tools (bash, the text editor, memory) as ordinary tools for Amazon Q. Pure.

Anthropic's models know these tools' inputs without a schema: the request names only a versioned
`type` (`bash_20250124`, `text_editor_20250728`, `memory_20250818`). Amazon Q's models know
nothing of them, so the gateway offers each as a client tool with the input schema and a short
description of what Anthropic documents for it; the client runs the calls exactly as it would
against Anthropic. The text editor before 2025-04 (`str_replace_editor`) also has `undo_edit`,
and inserts `new_str`; later versions insert `insert_text`.
"""

from __future__ import annotations

from typing import Any

_PATH = {"type": "string", "description": "Absolute path of the file or directory."}
_VIEW_RANGE = {
    "type": "array",
    "items": {"type": "integer"},
    "minItems": 2,
    "maxItems": 2,
    "description": "Optional [start_line, end_line] to view (1-based; end_line -1 means to the end of the file).",
}
_BASH = (
    "Run a command in a persistent bash session: state (working directory, variables) carries over "
    "between calls. Set `restart` to true to start a fresh session.",
    {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The bash command to run."},
            "restart": {"type": "boolean", "description": "Restart the bash session."},
        },
    },
)


def _editor(commands: list[str], insert_field: str) -> tuple[str, dict[str, Any]]:
    description = (
        "View, create and edit files. `view` shows a file with line numbers (or lists a directory); `create` "
        "writes `file_text` to a new file; `str_replace` replaces the one exact occurrence of `old_str` with "
        f"`new_str`; `insert` inserts `{insert_field}` after line `insert_line` (0: at the top)"
        + ("; `undo_edit` reverts the last edit of `path`." if "undo_edit" in commands else ".")
    )
    properties: dict[str, Any] = {
        "command": {"type": "string", "enum": commands},
        "path": _PATH,
        "file_text": {"type": "string", "description": "`create`: the whole content of the new file."},
        "old_str": {"type": "string", "description": "`str_replace`: the exact text to replace (it must occur once)."},
        "new_str": {"type": "string", "description": "`str_replace`: the text to put in its place."},
        "insert_line": {"type": "integer", "description": "`insert`: the line after which to insert."},
        "view_range": _VIEW_RANGE,
    }
    if insert_field != "new_str":
        properties[insert_field] = {"type": "string", "description": "`insert`: the text to insert."}
    return description, {"type": "object", "properties": properties, "required": ["command", "path"]}


_MEMORY = (
    "Your memory directory (/memories), kept across conversations: look at it before you start, and record "
    "what you learn as you go. `view` shows a file or lists a directory; `create`, `str_replace`, `insert`, "
    "`delete` and `rename` change it.",
    {
        "type": "object",
        "properties": {
            "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "delete", "rename"]},
            "path": {"type": "string", "description": "A path under /memories."},
            "view_range": _VIEW_RANGE,
            "file_text": {"type": "string"},
            "old_str": {"type": "string"},
            "new_str": {"type": "string"},
            "insert_line": {"type": "integer"},
            "insert_text": {"type": "string"},
            "old_path": {"type": "string", "description": "`rename`: the path to rename."},
            "new_path": {"type": "string", "description": "`rename`: its new path."},
        },
        "required": ["command"],
    },
)
_EARLY_EDITORS = ("text_editor_20241022", "text_editor_20250124")


def anthropic_tool(tool_type: str) -> tuple[str, dict[str, Any]] | None:
    """(description, input schema) of an Anthropic-defined client tool type; None for any other type."""
    if tool_type.startswith("bash_"):
        return _BASH
    if tool_type.startswith("memory_"):
        return _MEMORY
    if tool_type in _EARLY_EDITORS:
        return _editor(["view", "create", "str_replace", "insert", "undo_edit"], "new_str")
    if tool_type.startswith("text_editor_"):
        return _editor(["view", "create", "str_replace", "insert"], "insert_text")
    return None
