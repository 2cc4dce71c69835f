"""Images: Anthropic base64 image blocks → Amazon Q `{format, source: {bytes}}`, at most N per message.

URL and file sources are refused rather than fetched: the converter does no I/O, and fetching
arbitrary URLs from a gateway is a server-side request forgery risk.
"""

from __future__ import annotations

import functools
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


def q_image(block: ImageBlock, path: str) -> q.ImageBlock:
    source = block.source
    if isinstance(source, Base64ImageSource):
        image_format = _FORMATS.get(source.media_type.lower())
        if image_format is None:
            raise InvalidRequest(
                f"{path}.source.media_type",
                f"unsupported image type {source.media_type!r}; use image/png, image/jpeg, image/gif or image/webp",
            )
        if not source.data:
            raise InvalidRequest(f"{path}.source.data", "image data is empty")
        if len(source.data) > _MAX_BASE64_CHARS:
            raise InvalidRequest(f"{path}.source.data", f"image is larger than {MAX_IMAGE_BYTES} bytes")
        return {"format": image_format, "source": {"bytes": source.data}}
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
