"""Documents: Anthropic `document` blocks → text Amazon Q can take.

Amazon Q has no document input, so a document travels as text, and it is always said so:

- a plain-text source, a base64 `text/*` source or a content source is its own text (plus the
  images a content source holds);
- a base64 PDF is read with pypdf, page by page, each page under a marker that says the text
  was extracted by q2api (`[PDF 'report' — text extracted by q2api, page 2 of 3]`), so neither
  the model nor the user mistakes it for the file itself; the finding says what is lost
  (images, layout);
- a PDF with no extractable text (scanned pages), a broken PDF, another binary type, a URL or a
  Files API id gets a 400 that says so. Nothing is replaced by a note the model would answer
  about as if it had read the file.
"""

from __future__ import annotations

import base64
import binascii
import io

from q2api.anthropic.errors import InvalidRequest
from q2api.anthropic.types import (
    Base64DocumentSource,
    ContentDocumentSource,
    DocumentBlock,
    FileDocumentSource,
    ImageBlock,
    PlainTextDocumentSource,
    TextBlock,
    URLDocumentSource,
)
from q2api.conversion.report import Finding, FindingKind

PDF_MEDIA_TYPE = "application/pdf"
_SEND_INSTEAD = 'send the document as a base64 PDF, as text (source.type "text"), or its pages as images'


def document_text(
    block: DocumentBlock, path: str, message_index: int, report: list[Finding]
) -> tuple[str, list[tuple[str, ImageBlock]]]:
    """The document as labelled text, and the images a content document holds (with their paths)."""
    source = block.source
    if isinstance(source, Base64DocumentSource) and source.media_type.lower() == PDF_MEDIA_TYPE:
        return _pdf_text(block, source, path, message_index, report), []
    images: list[tuple[str, ImageBlock]] = []
    if isinstance(source, PlainTextDocumentSource):
        body = source.data
    elif isinstance(source, ContentDocumentSource):
        if isinstance(source.content, str):
            body = source.content
        else:
            texts = []
            for position, part in enumerate(source.content):
                if isinstance(part, TextBlock):
                    texts.append(part.text)
                else:
                    images.append((f"{path}.source.content.{position}", part))
            body = "\n\n".join(texts)
    elif isinstance(source, Base64DocumentSource) and source.media_type.lower().startswith("text/"):
        body = _decoded(source.data, path).decode("utf-8", "replace")
    else:
        raise _unsupported(source, path)
    report.append(Finding(FindingKind.DOCUMENT_AS_TEXT, message_index, detail=path))
    return f"{_label(block)}\n{body}", images


def _label(block: DocumentBlock) -> str:
    label = f"[Document: {block.title}]" if block.title else "[Document]"
    return f"{label}\n(Context: {block.context})" if block.context else label


def _pdf_text(
    block: DocumentBlock, source: Base64DocumentSource, path: str, message_index: int, report: list[Finding]
) -> str:
    pages = pdf_pages(_decoded(source.data, path), f"{path}.source.data")
    name = f"PDF {block.title!r}" if block.title else "PDF"
    if not any(text.strip() for text in pages):
        raise InvalidRequest(
            f"{path}.source.data",
            f"the {name} has no extractable text ({len(pages)} page(s), probably scanned images); Amazon Q takes "
            "no PDF input, so q2api can only send a PDF's text. Send the pages as images, or the text itself",
        )
    parts = [f"({name} context: {block.context})"] if block.context else []
    for number, text in enumerate(pages, start=1):
        marker = f"[{name} — text extracted by q2api, page {number} of {len(pages)}]"
        parts.append(f"{marker}\n{text.strip() or '(no extractable text on this page)'}")
    report.append(
        Finding(
            FindingKind.PDF_TEXT_EXTRACTED,
            message_index,
            detail=f"{path}: the {name} ({len(pages)} pages) was sent as the text extracted from it; "
            "Amazon Q takes no PDF input, so its images and layout do not reach the model",
        )
    )
    return "\n\n".join(parts)


def pdf_pages(data: bytes, path: str) -> list[str]:
    """The text of each page of a PDF, in order (a page without text gives "")."""
    try:
        from pypdf import PdfReader  # imported on the first PDF: most workers never read one (idle RSS)

        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidRequest(path, "the PDF is encrypted with a password; send it decrypted, or its text")
        return [page.extract_text() or "" for page in reader.pages]
    except InvalidRequest:
        raise
    # pypdf raises many exception types on malformed files (its own, ValueError, KeyError, …);
    # a PDF the client sent is untrusted input, and any failure to read it is the client's 400.
    except Exception as exc:
        raise InvalidRequest(path, f"the PDF could not be read ({type(exc).__name__}: {exc})") from None


def _decoded(data: str, path: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"{path}.source.data", "is not valid base64") from None


def _unsupported(source: object, path: str) -> InvalidRequest:
    if isinstance(source, URLDocumentSource):
        return InvalidRequest(
            f"{path}.source", f"URL documents are not supported: q2api does not fetch URLs; {_SEND_INSTEAD}"
        )
    if isinstance(source, FileDocumentSource):
        return InvalidRequest(f"{path}.source", f"file documents (Files API) are not supported; {_SEND_INSTEAD}")
    media_type = getattr(source, "media_type", "?")
    return InvalidRequest(
        f"{path}.source.media_type",
        f"unsupported document type {media_type!r}: Amazon Q takes no documents, and q2api can send only the "
        f"text of a PDF or a text/* document; {_SEND_INSTEAD}",
    )
