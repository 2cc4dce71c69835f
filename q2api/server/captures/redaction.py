"""What a capture leaves out, so a user can attach it to a bug report: pure functions over JSON documents.

- **Binary data** — base64 images and documents in the client's request (`source.type: "base64"`,
  `data:` URLs of the OpenAI door) and image bytes in the Amazon Q request — becomes a marker
  string, and a :class:`Placeholder` records its path and shape (characters, padding, whether it
  was valid base64, its `data:` prefix): enough for a replay to put back data of the very same
  size and validity (q2api.server.captures.placeholders), so the conversion reports the same.
- **Text**, with `Q2API_CAPTURE_REDACT_TEXT`: every message, tool-result, system and tool-input
  text is replaced by a filler of the same shape — letters by letters, digits by digits, other
  characters by ones of the same UTF-8 length; spaces, punctuation and XML-like tags
  (`<system-reminder>`) kept — so sizes, limits and what the guards look at stay the same. The
  filler comes from a keyed hash whose key is random per capture and never written: within one
  capture equal texts get equal fillers (a loop still looks like a loop), and nothing can be
  guessed back. Names, ids, models, tool definitions and schemas are kept: they are what a bug
  report is about, not the user's work.
- **Identifiers**: a `profileArn` keeps its region and shape, not its account number or profile
  id (an ARN is no secret, but names an AWS account, and a replay sends the configured account's
  own); Claude Code's `metadata.user_id` is removed.
- **Secrets** never enter a capture (headers are taken from an allow-list; settings are shown as
  set / unset), and `scrub_secrets` takes out any known secret value the text still holds — a key
  pasted into a prompt, say — as a last line.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

PLACEHOLDER_PREFIX = "<q2api placeholder:"
REDACTED = "<redacted>"
_DATA_URL = re.compile(r"data:(?P<media_type>[\w.+-]+/[\w.+-]+)?(?:;[\w.+-]+=[\w.+-]+)*;base64,", re.ASCII)
_PROFILE_ARN = re.compile(r"^(arn:aws[\w-]*:[\w-]+:[\w-]*:)(\d*)(:[\w-]+/)(.*)$")
# Request headers worth keeping: what the client is and what it asked for; never a credential.
SAFE_HEADERS = frozenset(
    {"user-agent", "anthropic-version", "anthropic-beta", "content-type", "content-length", "x-stainless-lang"}
)
# String fields that are structure, not the user's text: kept as they are.
_STRUCTURAL_KEYS = frozenset(
    {
        "type",
        "id",
        "tool_use_id",
        "tool_call_id",
        "name",
        "model",
        "role",
        "media_type",
        "signature",
        "stop_reason",
        "stop_sequences",
        "format",
        "detail",
        "reasoning_effort",
        "service_tier",
        "toolUseId",
        "modelId",
        "origin",
        "chatTriggerType",
        "conversationId",
        "status",
        "messageId",
    }
)
# Whole branches that are definitions, not conversation: kept.
_KEPT_BRANCHES = frozenset({"tools", "functions", "tool_choice", "function_call", "response_format", "thinking"})
# Branches whose every string value is the user's (a tool call's input): redacted whatever the key.
_INPUT_BRANCHES = frozenset({"input"})
_TAG = re.compile(r"</?[A-Za-z][\w:-]*>")


@dataclass(frozen=True, slots=True)
class Placeholder:
    """One piece of binary data left out of a capture, and its shape."""

    where: str  # "client_request" or "upstream_request"
    path: tuple[str | int, ...]  # inside that request's body
    kind: str  # "image", "document" or "data"
    media_type: str
    characters: int  # base64 characters, without any data: prefix
    padding: int  # trailing "=" characters
    valid_base64: bool
    prefix: str = ""  # the `data:…;base64,` prefix it had, if any

    def marker(self) -> str:
        return f"{PLACEHOLDER_PREFIX} {self.media_type or self.kind}, {self.characters} base64 characters>"

    def as_dict(self) -> dict[str, Any]:
        return {
            "where": self.where,
            "path": list(self.path),
            "kind": self.kind,
            "media_type": self.media_type,
            "characters": self.characters,
            "padding": self.padding,
            "valid_base64": self.valid_base64,
            "prefix": self.prefix,
        }

    @classmethod
    def from_dict(cls, fields: Mapping[str, Any]) -> Placeholder:
        return cls(
            where=str(fields["where"]),
            path=tuple(fields["path"]),
            kind=str(fields["kind"]),
            media_type=str(fields.get("media_type") or ""),
            characters=int(fields["characters"]),
            padding=int(fields.get("padding") or 0),
            valid_base64=bool(fields.get("valid_base64", True)),
            prefix=str(fields.get("prefix") or ""),
        )


def _placeholder(where: str, path: tuple[str | int, ...], data: str, media_type: str, prefix: str = "") -> Placeholder:
    body = data[len(prefix) :]
    kind = "image" if media_type.startswith("image/") else "document" if media_type else "data"
    return Placeholder(
        where,
        path,
        kind,
        media_type,
        len(body),
        len(body) - len(body.rstrip("=")),
        _is_base64(body),
        prefix,
    )


def _is_base64(data: str) -> bool:
    try:
        binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        return False
    return bool(data)


def without_binary(document: Any, where: str) -> tuple[Any, list[Placeholder]]:
    """A copy of a request body with every base64 image and document replaced by a marker."""
    placeholders: list[Placeholder] = []

    def walk(value: Any, path: tuple[str | int, ...]) -> Any:
        if isinstance(value, dict):
            if value.get("type") == "base64" and isinstance(value.get("data"), str):
                data = value["data"]
                prefix = _DATA_URL.match(data, 0, 200)  # a client that sent a whole data URL (q2api strips it)
                found = _placeholder(
                    where, (*path, "data"), data, str(value.get("media_type") or ""), prefix[0] if prefix else ""
                )
                placeholders.append(found)
                return {
                    key: found.prefix + found.marker() if key == "data" else walk(item, (*path, key))
                    for key, item in value.items()
                }
            source = value.get("source")
            if isinstance(source, dict) and isinstance(source.get("bytes"), str):  # an Amazon Q image block
                media_type = f"image/{value.get('format') or ''}"
                found = _placeholder(where, (*path, "source", "bytes"), source["bytes"], media_type)
                placeholders.append(found)
                return {**value, "source": {**source, "bytes": found.marker()}}
            return {key: walk(item, (*path, key)) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item, (*path, position)) for position, item in enumerate(value)]
        if isinstance(value, str) and value.startswith("data:"):
            prefix = _DATA_URL.match(value, 0, 200)
            if prefix is not None:
                found = _placeholder(where, path, value, prefix["media_type"] or "", prefix[0])
                placeholders.append(found)
                return prefix[0] + found.marker()
        return value

    return walk(document, ()), placeholders


class TextRedactor:
    """Same-shape fillers for the user's text, keyed per capture (see the module docstring)."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def text(self, value: str) -> str:
        if not value or value.startswith(PLACEHOLDER_PREFIX):
            return value
        digest = hmac.new(self._key, value.encode("utf-8", "surrogatepass"), "sha256").digest()
        noise = hashlib.shake_256(digest).digest(len(value))
        kept = bytearray(len(value))  # 1 where a tag stands
        if "<" in value:
            for match in _TAG.finditer(value):
                kept[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
        out = []
        for position, char in enumerate(value):
            fillers = _FILLERS.get(char) if not kept[position] else None
            if fillers is not None:
                out.append(fillers[noise[position]])
            elif kept[position] or char < "\x80":
                out.append(char)  # tags, spaces, punctuation, line breaks: shape, not content
            else:
                out.append(_same_width(char, noise[position]))
        return "".join(out)

    def request(self, document: Any) -> Any:
        """A client's request body (either door) with the user's texts replaced."""
        return self._walk(document, everything=False, key=None)

    def _walk(self, value: Any, *, everything: bool, key: str | None) -> Any:
        if isinstance(value, dict):
            binary = value.get("type") == "base64"  # an image or document: left to `without_binary`
            return {
                name: item
                if (not everything and name in _KEPT_BRANCHES) or (binary and name == "data")
                else self._walk(item, everything=everything or name in _INPUT_BRANCHES, key=name)
                for name, item in value.items()
            }
        if isinstance(value, list):
            return [self._walk(item, everything=everything, key=key) for item in value]
        if isinstance(value, str):
            if key == "user_id":
                return REDACTED
            if value.startswith("data:") and _DATA_URL.match(value, 0, 200):
                return value  # an OpenAI-door image or file: left to `without_binary`
            if not everything and key in _STRUCTURAL_KEYS:
                return value
            if key == "arguments":  # an OpenAI tool call's input, as JSON text
                return self._json_text(value)
            return self.text(value)
        return value

    def _json_text(self, value: str) -> str:
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return self.text(value)
        return orjson.dumps(self._walk(parsed, everything=True, key=None)).decode()


def _fillers(first: str, count: int) -> str:
    """256 fillers, one per noise byte, drawn from `count` characters from `first`."""
    return "".join(chr(ord(first) + byte % count) for byte in range(256))


# Letters become letters of the same case, digits digits (numbers stay numbers in tool inputs).
_FILLERS = {
    **{chr(code): _fillers("a", 26) for code in range(ord("a"), ord("z") + 1)},
    **{chr(code): _fillers("A", 26) for code in range(ord("A"), ord("Z") + 1)},
    **{chr(code): _fillers("0", 10) for code in range(ord("0"), ord("9") + 1)},
}


def _same_width(char: str, byte: int) -> str:
    """A filler for a non-ASCII character with the same UTF-8 length (so the body keeps its size)."""
    width = len(char.encode("utf-8", "surrogatepass"))
    if width == 2:
        return chr(0x0430 + byte % 32)  # Cyrillic а…я
    if width == 3:
        return chr(0x4E00 + byte)  # CJK ideographs
    return chr(0x1F600 + byte % 64)  # emoji


def mask_profile_arn(arn: str) -> str:
    """`arn:aws:codewhisperer:us-east-1:123456789012:profile/ABC` → `arn:aws:codewhisperer:us-east-1:************:profile/<redacted>`."""
    match = _PROFILE_ARN.match(arn)
    if match is None:
        return REDACTED
    return f"{match[1]}{'*' * len(match[2])}{match[3]}{REDACTED}"


def safe_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The request headers worth keeping (SAFE_HEADERS); credentials and everything else left out."""
    return {name.lower(): value for name, value in headers if name.lower() in SAFE_HEADERS}


def scrub_secrets(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of a known secret (8 characters or more) replaced by `<redacted>`."""
    for secret in secrets:
        if len(secret) < 8:
            continue
        text = text.replace(secret, REDACTED)
        escaped = orjson.dumps(secret).decode()[1:-1]  # as it stands inside a JSON string
        if escaped != secret:
            text = text.replace(escaped, REDACTED)
    return text
