"""Placeholders put back: data of the same size and validity as what a capture left out.

A replay converts (and may send) the captured request again. Where the capture has a marker, it
gets base64 of exactly the original length and padding, or equally invalid data where the
original was not base64 — so every size limit, every validity check and every finding comes out
as it did. Where the length allows, the data is a real file of the same type: a 1×1 image (PNG,
JPEG, GIF or WebP) padded to the size with a comment or an ancillary chunk, or a one-page PDF
whose text says that the document was left out — so Amazon Q can decode what a replay sends,
and the converter finds text in the PDF as it did.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Callable, Iterable
from typing import Any

from q2api.server.captures.redaction import Placeholder

INVALID_FILLER = "!"  # not in the base64 alphabet: invalid data stays invalid
PDF_TEXT = "This document was left out of a q2api capture."


def restored(document: Any, placeholders: Iterable[Placeholder], where: str) -> Any:
    """A copy of `document` (a captured request body) with its placeholders (those of `where`) filled."""
    filled = _copy(document)
    for placeholder in placeholders:
        if placeholder.where != where or not placeholder.path:
            continue
        parent = filled
        try:
            for step in placeholder.path[:-1]:
                parent = parent[step]
            parent[placeholder.path[-1]] = placeholder.prefix + filler(placeholder)
        except (KeyError, IndexError, TypeError):
            continue  # the capture was edited by hand: leave that spot as it is
    return filled


def filler(placeholder: Placeholder) -> str:
    """Data of the placeholder's length: a real file where possible, else base64 of zero bytes."""
    length, padding = placeholder.characters, placeholder.padding
    if not placeholder.valid_base64 or length % 4:
        return INVALID_FILLER * length
    raw_length = length // 4 * 3 - padding
    make = _FILES.get(placeholder.media_type.lower())
    data = make(raw_length) if make is not None else None
    if data is None or len(data) != raw_length:
        return "A" * (length - padding) + "=" * padding
    return base64.b64encode(data).decode()


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


# ------------------------------------------------------------------ files of a given size


def _png(size: int) -> bytes | None:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    body = chunk(b"IDAT", zlib.compress(b"\x00\x00"))
    end = chunk(b"IEND", b"")
    room = size - len(head) - len(body) - len(end)
    if room == 0:
        return head + body + end
    if room < 12:
        return None
    return head + chunk(b"tEXt", b"q2api\x00" + b"." * (room - 12 - 6)) + body + end if room >= 18 else None


# A baseline 1×1 grey JPEG: one 8×8 block whose coefficients are all zero, coded with one-symbol
# Huffman tables (DC category 0, AC end-of-block), so the entropy data is two 0 bits and padding.
_JPEG_HEAD = bytes.fromhex("ffd8")
_JPEG_BODY = (
    bytes.fromhex("ffdb004300")
    + b"\x01" * 64
    + bytes.fromhex("ffc0000b080001000101011100")
    + bytes.fromhex("ffc4001400")
    + bytes([1] + [0] * 15)
    + b"\x00"
    + bytes.fromhex("ffc4001410")
    + bytes([1] + [0] * 15)
    + b"\x00"
    + bytes.fromhex("ffda000801010000003f00")
    + b"\x3f"
    + bytes.fromhex("ffd9")
)


def _jpeg(size: int) -> bytes | None:
    room = size - len(_JPEG_HEAD) - len(_JPEG_BODY)
    comments = []  # COM segments after SOI: 0xff 0xfe, a two-byte length (itself included), the text
    while room > 0:
        part = min(room, 65537)
        if 0 < room - part < 4:
            part = room - 4
        if part < 4:
            return None
        comments.append(b"\xff\xfe" + struct.pack(">H", part - 2) + b"." * (part - 4))
        room -= part
    return _JPEG_HEAD + b"".join(comments) + _JPEG_BODY if room == 0 else None


def _gif(size: int) -> bytes | None:
    head = b"GIF89a" + struct.pack("<HHBBB", 1, 1, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    image = b"\x2c" + struct.pack("<HHHHB", 0, 0, 1, 1, 0) + b"\x02\x02\x44\x01\x00" + b"\x3b"
    room = size - len(head) - len(image)
    if room == 0:
        return head + image
    if room < 3:
        return None
    blocks, left = [], room - 3  # a comment extension: 0x21 0xfe, sub-blocks, 0x00
    while left > 0:
        part = min(left, 256)
        if left - part == 1:  # a sub-block needs at least two bytes (its length and one byte)
            part -= 1
        if part < 2:
            return None
        blocks.append(bytes([part - 1]) + b"." * (part - 1))
        left -= part
    return head + b"\x21\xfe" + b"".join(blocks) + b"\x00" + image


# A lossless 1×1 WebP bitstream (VP8L), inside the extended format so that a padding chunk is allowed.
_VP8L = base64.b64decode("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")[20:33]


def _webp(size: int) -> bytes | None:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return kind + struct.pack("<I", len(data)) + data + (b"\x00" if len(data) % 2 else b"")

    vp8x = chunk(b"VP8X", b"\x00\x00\x00\x00" + b"\x00\x00\x00" + b"\x00\x00\x00")
    image = chunk(b"VP8L", _VP8L)
    fixed = 12 + len(vp8x) + len(image)
    room = size - fixed
    # RIFF chunks have even sizes: an odd size gets one byte after the RIFF data, which readers ignore.
    trailer = b"\x00" * (room % 2)
    room -= len(trailer)
    if room == 0:
        pad = b""
    elif room >= 8:
        pad = chunk(b"q2ap", b"." * (room - 8))
    else:
        return None
    body = b"WEBP" + vp8x + image + pad
    return b"RIFF" + struct.pack("<I", len(body)) + body + trailer


def _pdf(size: int) -> bytes | None:
    stream = f"BT /F1 12 Tf 72 720 Td ({PDF_TEXT}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]

    def build(padding: int) -> bytes:
        lines, left = [], padding  # comment lines of at most 100 bytes, each at least "%\n"
        while left > 0:
            part = min(left, 100) if left - min(left, 100) != 1 else 99
            lines.append(b"%" + b"." * (part - 2) + b"\n")
            left -= part
        out = b"%PDF-1.4\n" + b"".join(lines)
        offsets = []
        for number, body in enumerate(objects, start=1):
            offsets.append(len(out))
            out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
        xref = len(out)
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
        out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
        out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
        return out

    unpadded = len(build(0))
    room = size - unpadded
    if room == 0:
        return build(0)
    if room < 2:
        return None
    padded = build(room)
    # The xref entries keep ten digits, but `startxref` grows a digit now and then: adjust once.
    padded = build(room - (len(padded) - size))
    return padded if len(padded) == size else None


_FILES: dict[str, Callable[[int], bytes | None]] = {
    "image/png": _png,
    "image/jpeg": _jpeg,
    "image/jpg": _jpeg,
    "image/gif": _gif,
    "image/webp": _webp,
    "application/pdf": _pdf,
}
