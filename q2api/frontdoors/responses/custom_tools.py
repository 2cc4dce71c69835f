"""Custom (freeform) tools ↔ Claude tools whose input is one string. Pure.

A Responses `custom` tool (Codex's `apply_patch`) takes its input as free text, not as JSON
arguments; a grammar may say what the text looks like. Amazon Q calls tools with JSON only, so the
gateway offers the model a tool of the same name whose input schema is an object with one string
property, `input`, and puts the grammar in the tool's description: the model writes the patch
as that string, and the client gets it back as a `custom_tool_call` item's `input`, exactly the
text the model wrote.

    claude_custom_tool(tool, "apply_patch")       # the Claude tool offered upstream
    claude_tool_input("*** Begin Patch…")         # a custom_tool_call item of the history → its tool_use input
    custom_input({"input": "*** Begin Patch…"})   # the tool_use input of a reply → the item's `input`

While the reply streams, `InputStream` reads the tool call's JSON as it arrives and hands out
the decoded text of its `input` at once, as `response.custom_tool_call_input.delta` events (OpenAI's
stream of a custom call). The relay holds a tool call until its input is whole
(q2api.translation.tool_input: a call cut off upstream must never look complete), so today the
JSON arrives in one piece and the text in one delta; the door does not depend on it.
"""

from __future__ import annotations

import enum
from typing import Any

import orjson

from q2api.anthropic.types import Tool
from q2api.openai.responses_types import CustomTool, CustomToolFormatGrammar

INPUT_FIELD = "input"  # the one property of a custom tool's Claude input schema


def claude_custom_tool(tool: CustomTool, claude_name: str) -> Tool:
    schema = {
        "type": "object",
        "properties": {INPUT_FIELD: {"type": "string", "description": "The tool's whole input, as free text."}},
        "required": [INPUT_FIELD],
        "additionalProperties": False,
    }
    return Tool(name=claude_name, input_schema=schema, description=custom_tool_description(tool))


def custom_tool_description(tool: CustomTool) -> str:
    """The tool's own description, then how its input is written (the grammar, when it has one)."""
    parts = [tool.description] if tool.description else []
    parts.append(
        f"This tool takes free text, not JSON arguments: pass the whole text as the string `{INPUT_FIELD}`, "
        "exactly as the tool reads it."
    )
    if isinstance(tool.format, CustomToolFormatGrammar):
        parts.append(
            f"The text must match this {tool.format.syntax} grammar:\n```\n{tool.format.definition.strip()}\n```"
        )
    return "\n\n".join(parts)


def claude_tool_input(text: str) -> dict[str, Any]:
    """A custom tool call's input text as the Claude `tool_use` input the model would have written."""
    return {INPUT_FIELD: text}


def custom_input(arguments: Any) -> str:
    """The text of a custom tool call, from the tool_use input the model wrote.

    `{"input": text}` as offered; an object with another single string (a model that renamed the
    property) gives that string; anything else is passed on as its JSON text, never dropped.
    """
    if isinstance(arguments, dict):
        value = arguments.get(INPUT_FIELD)
        if isinstance(value, str):
            return value
        strings = [item for item in arguments.values() if isinstance(item, str)]
        if len(arguments) == 1 and len(strings) == 1:
            return strings[0]
    if isinstance(arguments, str):
        return arguments
    return orjson.dumps(arguments).decode()


class _Where(enum.Enum):
    """Where `InputStream` is in `{"input": "…"}`."""

    OPENING = "opening"  # before the object's `{`
    KEY = "key"  # before the key (or inside it)
    COLON = "colon"  # after the key, before `:`
    VALUE = "value"  # after `:`, before the string's opening quote
    STRING = "string"  # inside the string: its text is handed out
    ESCAPE = "escape"  # after a backslash inside the string
    UNICODE = "unicode"  # inside a `\\uXXXX` escape
    DONE = "done"  # the string ended: the rest is the object's closing
    OTHER = "other"  # not the expected shape: nothing more is handed out (the end reads the whole JSON)


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_KEY = f'"{INPUT_FIELD}"'


class InputStream:
    """The text of `{"input": "…"}` handed out as the JSON arrives, in pieces of any size.

    `feed` returns the decoded text the new JSON completes. A call whose JSON is not that shape
    (another key first, a value that is not a string) hands out nothing more; `finish` then reads
    the whole JSON (`custom_input`) and gives what is left of it, so that what was handed out plus
    the rest is the call's whole input.
    """

    def __init__(self) -> None:
        self._where = _Where.OPENING
        self._key = ""
        self._unicode = ""
        self._pending_high: str | None = None  # the first half of a surrogate pair
        self.handed_out: list[str] = []
        self.input: str | None = None  # the whole input, once `finish` read it

    def feed(self, chunk: str) -> str:
        out: list[str] = []
        for char in chunk:
            self._step(char, out)
            if self._where is _Where.OTHER:
                break
        text = "".join(out)
        if text:
            self.handed_out.append(text)
        return text

    def finish(self, arguments_json: str) -> str:
        """The input text not yet handed out, now that `arguments_json` is the call's whole JSON;
        `input` is then the whole input."""
        whole = self._whole(arguments_json)
        given = self.text
        # Handed out and read whole agree by construction; were they ever not to, the whole
        # input (the item's `input`) is what the client acts on.
        rest = whole[len(given) :] if whole.startswith(given) else ""
        if rest:
            self.handed_out.append(rest)
        self.input = whole
        return rest

    def _whole(self, arguments_json: str) -> str:
        if not arguments_json.strip():
            return ""
        try:
            return custom_input(orjson.loads(arguments_json))
        except orjson.JSONDecodeError:
            # Not JSON to the letter (a raw line break inside the string): the string as read, when
            # it was read to its end; else the text itself, never nothing.
            return self.text if self._where is _Where.DONE else arguments_json

    @property
    def text(self) -> str:
        return "".join(self.handed_out)

    def _step(self, char: str, out: list[str]) -> None:
        where = self._where
        if where is _Where.STRING:
            if char == '"':
                if self._flush_surrogate(out):
                    self._where = _Where.DONE
            elif char == "\\":
                self._where = _Where.ESCAPE
            elif self._flush_surrogate(out):
                out.append(char)
        elif where is _Where.ESCAPE:
            if char == "u":
                self._unicode, self._where = "", _Where.UNICODE
            elif char in _ESCAPES:
                self._where = _Where.STRING
                if self._flush_surrogate(out):
                    out.append(_ESCAPES[char])
            else:
                self._where = _Where.OTHER
        elif where is _Where.UNICODE:
            self._unicode += char
            if len(self._unicode) == 4:
                self._on_unicode(out)
        elif char in " \t\r\n":
            if where is _Where.KEY and self._key:
                self._where = _Where.OTHER  # whitespace inside the key
        elif where is _Where.OPENING:
            self._where = _Where.KEY if char == "{" else _Where.OTHER
        elif where is _Where.KEY:
            self._key += char
            if not _KEY.startswith(self._key):
                self._where = _Where.OTHER
            elif self._key == _KEY:
                self._where = _Where.COLON
        elif where is _Where.COLON:
            self._where = _Where.VALUE if char == ":" else _Where.OTHER
        elif where is _Where.VALUE:
            self._where = _Where.STRING if char == '"' else _Where.OTHER
        # _Where.DONE: the object's closing (or more keys): nothing more to hand out.

    def _on_unicode(self, out: list[str]) -> None:
        try:
            code = int(self._unicode, 16)
        except ValueError:
            self._where = _Where.OTHER
            return
        self._where = _Where.STRING
        if 0xDC00 <= code <= 0xDFFF and self._pending_high is not None:
            pair = (self._pending_high + chr(code)).encode("utf-16", "surrogatepass").decode("utf-16")
            self._pending_high = None
            out.append(pair)
        elif not self._flush_surrogate(out):
            return
        elif 0xD800 <= code <= 0xDBFF:  # a high surrogate: its pair follows as another escape
            self._pending_high = chr(code)
        elif 0xDC00 <= code <= 0xDFFF:  # a low surrogate alone
            self._where = _Where.OTHER
        else:
            out.append(chr(code))

    def _flush_surrogate(self, out: list[str]) -> bool:
        """False (and nothing more handed out) after a high surrogate with no pair: the end reads
        the whole JSON."""
        if self._pending_high is None:
            return True
        self._where = _Where.OTHER
        return False
