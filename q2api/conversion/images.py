"""Images: Anthropic base64 image blocks → Amazon Q `{format, source: {bytes}}`, at most N per message.

URL and file sources are refused rather than fetched: the converter does no I/O, and fetching
arbitrary URLs from a gateway is a server-side request forgery risk.
"""

from __future__ import annotations

from typing import Any

from q2api.amazonq.types import MAX_IMAGE_BYTES
from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import Base64ImageSource, ImageBlock, URLImageSource
from q2api.conversion.report import Finding, FindingKind

_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
# base64 grows data by 4/3.
_MAX_BASE64_CHARS = -(-MAX_IMAGE_BYTES // 3) * 4


def q_image(block: ImageBlock, path: str) -> dict[str, Any]:
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


def capped_images(images: list[tuple[int, dict[str, Any]]], limit: int, report: list[Finding]) -> list[dict[str, Any]]:
    """The most recent `limit` images of one message; each older one is reported."""
    if len(images) <= limit:
        return [image for _, image in images]
    dropped = len(images) - limit
    for message_index, _ in images[:dropped]:
        report.append(
            Finding(
                FindingKind.IMAGE_DROPPED,
                message_index,
                detail=f"Amazon Q takes at most {limit} images per message; the {limit} most recent were kept",
            )
        )
    return [image for _, image in images[dropped:]]
