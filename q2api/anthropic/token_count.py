"""Offline token estimation for Claude requests and replies.

Claude's current tokenizers are not public, so nothing here tokenizes. Text is priced
by a linear model over what drives a byte-level BPE: the number of pre-tokens (runs of
letters/digits, runs of punctuation, camelCase humps, letter/digit switches), newlines,
digits, and 2-, 3- and 4-byte UTF-8 characters. The coefficients were fitted
by `bench/calibrate_tokens.py` against the last tokenizer Anthropic published;
`docs/token-estimation.md` gives the method, the measured error and how to reproduce it.

Every count is a C-level pass (`bytes.translate`, `bytes.count`). Text longer than
`_EXACT_UP_TO` characters is priced from evenly spaced windows, so one estimate costs
about the same however large the request is. Images are priced from the dimensions in
their headers, read by decoding a few bytes of base64, never the whole image.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Iterable
from typing import Any

import orjson

from q2api.anthropic.types import (
    SERVER_TOOL_RESULT_BLOCKS,
    Base64DocumentSource,
    Base64ImageSource,
    CompactionBlock,
    ContentDocumentSource,
    CountTokensRequest,
    DocumentBlock,
    ImageBlock,
    MessagesRequest,
    PlainTextDocumentSource,
    RedactedThinkingBlock,
    SearchResultBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    Tool,
    ToolReferenceBlock,
    ToolResultBlock,
    ToolUseBlock,
)

# ---------------------------------------------------------------- text model

# Fitted by `python bench/calibrate_tokens.py --fit` (least squares on relative error,
# every corpus category weighted equally). Reference: the Claude tokenizer shipped in
# anthropic==0.38.0. Re-run the script and paste its output here after changing features.
TOKENS_PER_WORD = 1.0703
TOKENS_PER_PUNCT_RUN = 1.0251
TOKENS_PER_CAMEL_HUMP = 1.2910
TOKENS_PER_LETTER_DIGIT_SWITCH = 1.1384
TOKENS_PER_DIGIT = 0.2450
TOKENS_PER_NEWLINE = 0.8786
TOKENS_PER_2BYTE = 1.7691
TOKENS_PER_3BYTE = 0.9492
TOKENS_PER_4BYTE = 2.4471
TOKENS_PER_STRING = 0.3666  # each separate string restarts the BPE: a one-word string is one token

COEFFICIENT_NAMES = (
    "TOKENS_PER_WORD", "TOKENS_PER_PUNCT_RUN", "TOKENS_PER_CAMEL_HUMP", "TOKENS_PER_LETTER_DIGIT_SWITCH",
    "TOKENS_PER_DIGIT", "TOKENS_PER_NEWLINE", "TOKENS_PER_2BYTE", "TOKENS_PER_3BYTE", "TOKENS_PER_4BYTE",
)  # fmt: skip


def _table(mapping: dict[bytes, bytes], default: bytes = b".") -> bytes:
    """A 256-byte `bytes.translate` table: each byte of a key maps to its value's byte."""
    table = bytearray(default * 256)
    for sources, target in mapping.items():
        for byte in sources:
            table[byte] = target[0]
    return bytes(table)


_LOWER = b"abcdefghijklmnopqrstuvwxyz"
_UPPER = _LOWER.upper()
_DIGITS = b"0123456789"
_WHITESPACE = b" \t\n\r\x0b\x0c"
_PUNCTUATION = bytes(b for b in range(0x80) if b not in _LOWER + _UPPER + _DIGITS + _WHITESPACE)
_WORD_TABLE = _table({_LOWER + _UPPER + _DIGITS: b"w"})
_PUNCT_TABLE = _table({_PUNCTUATION: b"p"})
_CASE_TABLE = _table({_LOWER: b"a", _UPPER: b"A"})
_KIND_TABLE = _table({_LOWER + _UPPER: b"a", _DIGITS: b"0"})
_ASCII_AND_CONTINUATION = bytes(range(0xC0))
_LEADS_2BYTE = bytes(range(0xC0, 0xE0))
_LEADS_2_3BYTE = bytes(range(0xC0, 0xF0))
# Joins texts priced together. Every table maps it to ".", so it only separates: no
# feature counts a transition into it, and it breaks every transition across it.
_SEPARATOR = "\r"

# Texts up to _EXACT_UP_TO characters are priced exactly. Longer ones are priced from
# _WINDOWS evenly spaced windows of _WINDOW characters (bench/calibrate_tokens.py reports
# the sampling error), so an estimate costs about the same however large the text is.
_WINDOW = 16
_WINDOWS = 256
_EXACT_UP_TO = _WINDOW * _WINDOWS


def text_features(raw: bytes) -> tuple[int, ...]:
    """The model's counts for UTF-8 `raw`, in the order of `COEFFICIENT_NAMES`."""
    words = raw.translate(_WORD_TABLE)
    puncts = raw.translate(_PUNCT_TABLE)
    kinds = raw.translate(_KIND_TABLE)
    features = (
        words.count(b".w") + words.startswith(b"w"),
        puncts.count(b".p") + puncts.startswith(b"p"),
        raw.translate(_CASE_TABLE).count(b"aA"),
        kinds.count(b"a0") + kinds.count(b"0a"),
        kinds.count(b"0"),
        raw.count(b"\n"),
    )
    if raw.isascii():
        return (*features, 0, 0, 0)
    # Only lead bytes are counted, so a cut through a character still counts right.
    leads = raw.translate(None, _ASCII_AND_CONTINUATION)
    wide = leads.translate(None, _LEADS_2BYTE)
    four = len(wide.translate(None, _LEADS_2_3BYTE))
    return (*features, len(leads) - len(wide), len(wide) - four, four)


def _priced(text: str) -> float:
    words, punct_runs, humps, switches, digits, newlines, two, three, four = text_features(
        text.encode("utf-8", "surrogatepass")
    )
    return (
        words * TOKENS_PER_WORD
        + punct_runs * TOKENS_PER_PUNCT_RUN
        + humps * TOKENS_PER_CAMEL_HUMP
        + switches * TOKENS_PER_LETTER_DIGIT_SWITCH
        + digits * TOKENS_PER_DIGIT
        + newlines * TOKENS_PER_NEWLINE
        + two * TOKENS_PER_2BYTE
        + three * TOKENS_PER_3BYTE
        + four * TOKENS_PER_4BYTE
    )


def _features_cost(text: str) -> float:
    """Cost of `text` without the per-string constant; sampled when long."""
    size = len(text)
    if size <= _EXACT_UP_TO:
        return _priced(text)
    # Each window carries the character before it as context, so transitions into the
    # window's first character are judged right; pricing the contexts alone and
    # subtracting removes what they add themselves. What remains is unbiased.
    span = _WINDOW + 1
    step = (size - span) // (_WINDOWS - 1)
    windows = _SEPARATOR.join([text[i : i + span] for i in range(0, step * _WINDOWS, step)])
    contexts = _SEPARATOR.join(windows[:: span + 1])
    return (_priced(windows) - _priced(contexts)) * size / (_WINDOWS * _WINDOW)


def text_cost(text: str) -> float:
    """Unrounded token estimate of one string (sum these, round once)."""
    if not text:
        return 0.0
    return TOKENS_PER_STRING + _features_cost(text)


def estimate_text_tokens(text: str) -> int:
    """Estimated Claude tokens in `text`: 0 for empty text, at least 1 otherwise."""
    if not text:
        return 0
    return max(1, round(text_cost(text)))


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode("utf-8")
    except (TypeError, orjson.JSONEncodeError):
        return str(value)


def estimate_json_tokens(value: Any) -> int:
    """Estimated tokens of `value` as compact JSON (how tool inputs and schemas travel)."""
    return estimate_text_tokens(_json_text(value))


# ---------------------------------------------------------------- images and documents

# Anthropic's documented image cost: tokens ≈ width × height / 750, after resizing images
# whose long edge exceeds 1568 px or whose area exceeds ~1.19 MP (1092×1092), so at most
# about 1,590 tokens an image.
IMAGE_PIXELS_PER_TOKEN = 750
IMAGE_MAX_EDGE = 1568
IMAGE_MAX_PIXELS = 1092 * 1092
IMAGE_MAX_TOKENS = math.ceil(IMAGE_MAX_PIXELS / IMAGE_PIXELS_PER_TOKEN)
# Unreadable header: assume a compressed image spends ~0.25 bytes a pixel (typical JPEG
# photo or PNG screenshot), so pixels ≈ 4 × bytes; capped like any image.
IMAGE_PIXELS_PER_BYTE_GUESS = 4
# Anthropic's PDF support costs ~1,500-3,000 text tokens plus one page image per page;
# with no parser here, assume ~60 KB a page and the middle of that range.
PDF_BYTES_PER_PAGE = 60_000
PDF_TOKENS_PER_PAGE = 3_000
# Text documents sent as base64: ~4 bytes a token, like English.
DOCUMENT_BYTES_PER_TOKEN = 4

_JPEG_SIZE_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_MAX_SEGMENTS = 64


def image_tokens(width: int, height: int) -> int:
    """Anthropic's image cost for a `width` × `height` image (after its automatic resize)."""
    if width <= 0 or height <= 0:
        return 0
    scale = min(1.0, IMAGE_MAX_EDGE / max(width, height), math.sqrt(IMAGE_MAX_PIXELS / (width * height)))
    return max(1, math.ceil(width * height * scale * scale / IMAGE_PIXELS_PER_TOKEN))


def _base64_slice(data: str, start: int, length: int) -> bytes:
    """Bytes [start, start + length) of base64 `data`, decoding only the quartets that hold them."""
    first = start // 3 * 4
    chunk = data[first : -(-(start + length) // 3) * 4]
    chunk += "=" * (-len(chunk) % 4)
    skip = start - first // 4 * 3
    return base64.b64decode(chunk, validate=True)[skip : skip + length]


def _jpeg_dimensions(data: str) -> tuple[int, int] | None:
    position = 2  # after the SOI marker
    for _ in range(_JPEG_MAX_SEGMENTS):
        head = _base64_slice(data, position, 9)
        if len(head) < 4 or head[0] != 0xFF:
            return None
        marker = head[1]
        if marker == 0xFF:  # fill byte
            position += 1
        elif marker in _JPEG_SIZE_MARKERS:
            if len(head) < 9:
                return None
            height, width = struct.unpack(">HH", head[5:9])
            return width, height
        elif marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            position += 2
        else:
            position += 2 + struct.unpack(">H", head[2:4])[0]
    return None


def image_dimensions(data: str) -> tuple[int, int] | None:
    """(width, height) from the header of a base64 PNG, JPEG, GIF or WebP; None if unreadable."""
    if data.startswith("data:"):  # tolerate a data URL where bare base64 belongs
        data = data[data.find(",") + 1 :]
    try:
        head = _base64_slice(data, 0, 30)
        if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR":
            width, height = struct.unpack(">II", head[16:24])
        elif head[:6] in (b"GIF87a", b"GIF89a"):
            width, height = struct.unpack("<HH", head[6:10])
        elif head[:4] == b"RIFF" and head[8:12] == b"WEBP":
            chunk = head[12:16]
            if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
                width, height = (v & 0x3FFF for v in struct.unpack("<HH", head[26:30]))
            elif chunk == b"VP8L" and head[20] == 0x2F:
                bits = int.from_bytes(head[21:25], "little")
                width, height = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
            elif chunk == b"VP8X":
                width = int.from_bytes(head[24:27], "little") + 1
                height = int.from_bytes(head[27:30], "little") + 1
            else:
                return None
        elif head[:3] == b"\xff\xd8\xff":
            found = _jpeg_dimensions(data)
            if found is None:
                return None
            width, height = found
        else:
            return None
    except (binascii.Error, ValueError, struct.error, IndexError):
        return None
    return (width, height) if width > 0 and height > 0 else None


def _decoded_size(data: str) -> int:
    return len(data) * 3 // 4


def base64_image_tokens(data: str) -> int:
    """Tokens of a base64 image: from its header, else from its size."""
    dimensions = image_dimensions(data)
    if dimensions is not None:
        return image_tokens(*dimensions)
    guess = _decoded_size(data) * IMAGE_PIXELS_PER_BYTE_GUESS / IMAGE_PIXELS_PER_TOKEN
    return max(1, min(IMAGE_MAX_TOKENS, math.ceil(guess)))


def _image_cost(block: ImageBlock) -> float:
    if isinstance(block.source, Base64ImageSource):
        return base64_image_tokens(block.source.data)
    return IMAGE_MAX_TOKENS  # URL / file images: size unknown, assume the largest


def _base64_document_cost(source: Base64DocumentSource) -> float:
    size = _decoded_size(source.data)
    if source.media_type == "application/pdf":
        return max(1, math.ceil(size / PDF_BYTES_PER_PAGE)) * PDF_TOKENS_PER_PAGE
    return math.ceil(size / DOCUMENT_BYTES_PER_TOKEN)


# ---------------------------------------------------------------- requests

# Amazon Q adds its own system prompt to every conversation; the request never shows it.
# Third-party measurement (jwadow/kiro-gateway PR #107, comparing contextUsagePercentage ×
# window with local counts): about 2,000 tokens. Check it against DEBUG logs (see docs).
AMAZON_Q_HIDDEN_PROMPT_TOKENS = 2_000
# Anthropic documents a tool-use system prompt of 346 tokens (tool_choice auto/none) for
# Claude 4 models, added whenever `tools` is non-empty.
TOOL_USE_SYSTEM_PROMPT_TOKENS = 346
# Framing the model sees around each part (role markers, tool-call and tool-result
# wrappers, a tool's definition header). Not measurable offline: small, deliberate guesses.
REQUEST_OVERHEAD_TOKENS = 4
MESSAGE_OVERHEAD_TOKENS = 4
TOOL_DEFINITION_OVERHEAD_TOKENS = 8
TOOL_USE_OVERHEAD_TOKENS = 10
TOOL_RESULT_OVERHEAD_TOKENS = 8
CONTAINER_UPLOAD_TOKENS = 16
# Redacted thinking is encrypted: price the hidden text at ~4 bytes a token of what it decodes to.
REDACTED_THINKING_BYTES_PER_TOKEN = 4


def _block_costs(blocks: Iterable[Any], texts: list[str]) -> float:
    """Append the texts of `blocks` to `texts`; return their fixed (non-text) cost."""
    fixed = 0.0
    for block in blocks:
        kind = type(block)
        if kind is TextBlock:
            texts.append(block.text)
        elif kind is ToolResultBlock:
            fixed += TOOL_RESULT_OVERHEAD_TOKENS
            content = block.content
            if type(content) is str:
                texts.append(content)
            elif content:
                fixed += _block_costs(content, texts)
        elif kind is ToolUseBlock or kind is ServerToolUseBlock:
            fixed += TOOL_USE_OVERHEAD_TOKENS
            texts.append(block.name)
            if block.input is not None:
                texts.append(_json_text(block.input))
        elif kind is ThinkingBlock:
            texts.append(block.thinking)
        elif kind is ImageBlock:
            fixed += _image_cost(block)
        elif kind is RedactedThinkingBlock:
            fixed += math.ceil(_decoded_size(block.data) / REDACTED_THINKING_BYTES_PER_TOKEN)
        elif kind is DocumentBlock:
            fixed += _document_costs(block, texts)
        elif kind is SearchResultBlock:
            texts.append(block.source)
            texts.append(block.title)
            fixed += _block_costs(block.content, texts)
        elif kind is ToolReferenceBlock:
            texts.append(block.tool_name)
        elif isinstance(block, SERVER_TOOL_RESULT_BLOCKS):
            fixed += TOOL_RESULT_OVERHEAD_TOKENS
            texts.append(_json_text(block.content))
        elif kind is CompactionBlock:
            texts.append(block.content or "")
        else:  # container_upload, and any block type added later
            fixed += CONTAINER_UPLOAD_TOKENS
    return fixed


def _document_costs(block: DocumentBlock, texts: list[str]) -> float:
    if block.title:
        texts.append(block.title)
    if block.context:
        texts.append(block.context)
    source = block.source
    if isinstance(source, PlainTextDocumentSource):
        texts.append(source.data)
    elif isinstance(source, ContentDocumentSource):
        if isinstance(source.content, str):
            texts.append(source.content)
        else:
            return _block_costs(source.content, texts)
    elif isinstance(source, Base64DocumentSource):
        return _base64_document_cost(source)
    else:  # URL / file documents: contents unknown, assume one PDF page
        return PDF_TOKENS_PER_PAGE
    return 0.0


def _tool_costs(tools: list[Tool], texts: list[str]) -> float:
    for tool in tools:
        texts.append(tool.name)
        if tool.description:
            texts.append(tool.description)
        if tool.input_schema is not None:
            texts.append(_json_text(tool.input_schema))
        elif tool.type:
            texts.append(tool.type)
    return TOOL_USE_SYSTEM_PROMPT_TOKENS + TOOL_DEFINITION_OVERHEAD_TOKENS * len(tools)


def estimate_blocks_tokens(blocks: Iterable[Any]) -> int:
    """Estimated tokens of some content blocks on their own (what clearing them saves)."""
    texts: list[str] = []
    fixed = _block_costs(blocks, texts)
    return round(fixed + texts_cost(texts))


def texts_cost(texts: list[str]) -> float:
    """Unrounded token estimate of many strings, priced together in one pass."""
    strings = len(texts) - texts.count("")
    if not strings:
        return 0.0
    return TOKENS_PER_STRING * strings + _features_cost(_SEPARATOR.join(texts))


def estimate_request_tokens(
    request: MessagesRequest | CountTokensRequest, *, include_upstream_prompt: bool = True
) -> int:
    """Estimated input tokens of `request` as Amazon Q's model will see it.

    `include_upstream_prompt=False` leaves out Amazon Q's hidden system prompt. Claude
    Code's `/context` sums many small count_tokens calls (one per tool, among others),
    where a per-call constant would be counted once per call, not once per conversation.
    """
    texts: list[str] = []
    fixed = float(REQUEST_OVERHEAD_TOKENS)
    if include_upstream_prompt:
        fixed += AMAZON_Q_HIDDEN_PROMPT_TOKENS
    if isinstance(request.system, str):
        texts.append(request.system)
    elif request.system:
        fixed += _block_costs(request.system, texts)
    for message in request.messages:
        fixed += MESSAGE_OVERHEAD_TOKENS
        content = message.content
        if type(content) is str:
            texts.append(content)
        elif content:
            fixed += _block_costs(content, texts)
    if request.tools:
        fixed += _tool_costs(request.tools, texts)
    return max(1, round(fixed + texts_cost(texts)))
