"""Images: Anthropic base64 image blocks → Amazon Q `{format, source: {bytes}}`, at most N per message.

URL and file sources are refused rather than fetched: the converter does no I/O, and fetching
arbitrary URLs from a gateway is a server-side request forgery risk.

The bytes are checked before they travel: a client that puts a whole data URL in `source.data`
(`data:image/png;base64,iVBOR…`, a common bug) gets the prefix stripped — its media type wins
when it disagrees with `media_type`, since it was written with the data — and data that is not
base64 is a 400 naming the field, instead of an opaque 400 from Amazon Q.
"""

from __future__ import annotations

import binascii
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from q2api.amazonq import types as q
from q2api.amazonq.types import MAX_IMAGE_BYTES
from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import Base64ImageSource, ImageBlock, URLImageSource
from q2api.conversion.report import Finding, FindingKind

_FORMATS: dict[str, q.ImageFormat] = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
# base64 grows data by 4/3.
_MAX_BASE64_CHARS = -(-MAX_IMAGE_BYTES // 3) * 4
# `data:image/png;base64,` (parameters such as `;charset=…` tolerated), looked for only at the start.
_DATA_URL_PREFIX = re.compile(r"data:(?P<media_type>[\w.+-]+/[\w.+-]+)?(?:;[\w.+-]+=[\w.+-]+)*;base64,", re.ASCII)
_LONGEST_PREFIX = 200


def is_base64(data: str) -> bool:
    """Whether `data` is standard, padded base64 (what Amazon Q's blob field takes), checked by
    decoding it in C: a few milliseconds for the largest image Amazon Q accepts."""
    try:
        binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        return False
    return True


def q_image(block: ImageBlock, path: str, message_index: int, report: list[Finding]) -> q.ImageBlock:
    source = block.source
    if isinstance(source, Base64ImageSource):
        media_type, data = source.media_type, source.data
        prefix = _DATA_URL_PREFIX.match(data, 0, _LONGEST_PREFIX)
        if prefix is not None:
            data = data[prefix.end() :]
            declared = media_type
            media_type = prefix["media_type"] or media_type
            change = "" if media_type.lower() == declared.lower() else f"; its type {media_type} used, not {declared}"
            report.append(
                Finding(
                    FindingKind.IMAGE_DATA_URL_STRIPPED,
                    message_index,
                    detail=f"{path}.source.data: the data URL prefix {prefix[0][:60]!r} was removed{change}",
                )
            )
        image_format = _FORMATS.get(media_type.lower())
        if image_format is None:
            raise InvalidRequest(
                f"{path}.source.media_type",
                f"unsupported image type {media_type!r}; use image/png, image/jpeg, image/gif or image/webp",
            )
        if not data:
            raise InvalidRequest(f"{path}.source.data", "image data is empty")
        if len(data) > _MAX_BASE64_CHARS:
            raise InvalidRequest(f"{path}.source.data", f"image is larger than {MAX_IMAGE_BYTES} bytes")
        if not is_base64(data):
            raise InvalidRequest(
                f"{path}.source.data",
                "image data is not valid base64 (standard alphabet A-Z a-z 0-9 + /, padded with =, no spaces "
                "or line breaks, and no data: URL prefix other than data:image/…;base64,)",
            )
        return {"format": image_format, "source": {"bytes": data}}
    if isinstance(source, URLImageSource):
        raise InvalidRequest(
            f"{path}.source",
            "URL images are not supported: q2api does not fetch URLs; send the image as base64 "
            '(source.type "base64" with media_type and data)',
        )
    raise InvalidRequest(
        f"{path}.source",
        'file images (Files API) are not supported; send the image as base64 (source.type "base64")',
    )


@dataclass(frozen=True, slots=True)
class TurnImage:
    """An image on its way into one Amazon Q user message, with where it came from."""

    message_index: int
    path: str  # its JSON path in the client's request, for errors and findings
    image: q.ImageBlock


@dataclass(frozen=True, slots=True)
class ImageSelection:
    """The images one Amazon Q message carries: the most recent `limit`; older ones are dropped."""

    kept: tuple[TurnImage, ...]
    dropped: tuple[TurnImage, ...]
    limit: int

    @property
    def blocks(self) -> list[q.ImageBlock]:
        return [image.image for image in self.kept]

    def attachment_number(self, path: str) -> int | None:
        """1-based position of the image among the message's attachments; None when it was dropped."""
        for number, image in enumerate(self.kept, start=1):
            if image.path == path:
                return number
        return None


def select_images(images: list[TurnImage], limit: int, report: list[Finding]) -> ImageSelection:
    """The most recent `limit` images of one message; each older one is reported, by path."""
    if not images:
        return _no_images(limit)  # most messages: one shared selection, not one per message
    dropped = images[: max(len(images) - limit, 0)]
    for image in dropped:
        report.append(
            Finding(
                FindingKind.IMAGE_DROPPED,
                image.message_index,
                detail=f"{image.path}: Amazon Q takes at most {limit} images per message; "
                f"the {limit} most recent of this message's {len(images)} were sent",
            )
        )
    return ImageSelection(tuple(images[len(dropped) :]), tuple(dropped), limit)


@functools.cache
def _no_images(limit: int) -> ImageSelection:
    return ImageSelection((), (), limit)


def tool_result_image_note(paths: list[str], selection: ImageSelection) -> str:
    """What the model is told about the images of one tool result: which are attached, which were not sent."""
    numbers = [selection.attachment_number(path) for path in paths]
    attached = [(position, number) for position, number in enumerate(numbers, start=1) if number is not None]
    missing = [position for position, number in enumerate(numbers, start=1) if number is None]
    count = f"{len(paths)} image" + ("s" if len(paths) > 1 else "")
    reason = (
        f"Amazon Q takes at most {selection.limit} images per message and the {selection.limit} most recent were sent"
    )
    if not missing:
        return f"[This tool result returned {count}, attached to this message as {_numbered('attachment', numbers)}]"
    if not attached:
        return f"[This tool result returned {count}; none was sent: {reason}]"
    return (
        f"[This tool result returned {count}: {_numbered('image', [p for p, _ in attached])} of them "
        f"attached to this message as {_numbered('attachment', [n for _, n in attached])}; "
        f"{_numbered('image', missing)} not sent: {reason}]"
    )


def _numbered(noun: str, numbers: Sequence[int | None]) -> str:
    """`attachment 3`, `attachments 3–6`, or `images 1, 4` (numbers in increasing order)."""
    values = [number for number in numbers if number is not None]
    if len(values) == 1:
        return f"{noun} {values[0]}"
    if values == list(range(values[0], values[-1] + 1)):
        return f"{noun}s {values[0]}–{values[-1]}"
    return f"{noun}s {', '.join(map(str, values))}"
