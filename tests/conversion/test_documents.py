"""Documents: a PDF's text extracted page by page and marked so; text sources as text; anything
that cannot travel as text is a 400 that says why, never a note in its place."""

from __future__ import annotations

import base64

import pytest

from q2api.anthropic.errors import InvalidRequest
from q2api.conversion.report import Severity
from tests.support.converter_helpers import assistant, convert, current, kinds, text, tool_result, tool_use, user
from tests.support.pdf_files import blank_pdf, pdf_document, pdf_with_text


def test_a_pdf_is_sent_as_its_text_page_by_page_marked_as_extracted():
    pdf = pdf_with_text("Quarterly revenue grew 12%.", "", "Outlook: stable.")
    conversion = convert([user([pdf_document(pdf, title="report"), text("Summarise it.")])])
    content = current(conversion)["content"]
    assert content.index("[PDF 'report' — text extracted by q2api, page 1 of 3]") < content.index(
        "Quarterly revenue grew 12%."
    )
    assert "[PDF 'report' — text extracted by q2api, page 2 of 3]\n(no extractable text on this page)" in content
    assert "[PDF 'report' — text extracted by q2api, page 3 of 3]\nOutlook: stable." in content
    assert content.endswith("Summarise it.")
    [finding] = [finding for finding in conversion.report if finding.kind == "pdf_text_extracted"]
    assert finding.severity is Severity.WARNING and finding.message_index == 0
    assert "messages.0.content.0" in finding.detail and "3 pages" in finding.detail


def test_a_pdf_inside_a_tool_result_is_extracted_too():
    pdf = pdf_with_text("log line 1")
    conversion = convert(
        [user("read it"), assistant([tool_use("t1", "Read")]), user([tool_result("t1", [pdf_document(pdf)])])]
    )
    [result] = current(conversion)["userInputMessageContext"]["toolResults"]
    assert result["content"][0]["text"] == "[PDF — text extracted by q2api, page 1 of 1]\nlog line 1"


def test_a_pdf_without_text_is_a_400_that_says_so():
    with pytest.raises(InvalidRequest) as caught:
        convert([user([text("what does it say?"), pdf_document(blank_pdf(2), title="scan")])])
    assert caught.value.path == "messages.0.content.1.source.data"
    assert "the PDF 'scan' has no extractable text (2 page(s)" in caught.value.problem
    assert caught.value.status == 400 and caught.value.error_type == "invalid_request_error"


def test_a_broken_pdf_is_a_400():
    with pytest.raises(InvalidRequest) as caught:
        convert([user([pdf_document(b"%PDF-1.4\nnot really")])])
    assert caught.value.path == "messages.0.content.0.source.data"
    assert "the PDF could not be read" in caught.value.problem


def test_text_sources_are_sent_as_text():
    plain = {"type": "document", "title": "notes", "source": {"type": "text", "media_type": "text/plain", "data": "a"}}
    encoded = base64.b64encode("b – ü".encode()).decode()
    markdown = {"type": "document", "source": {"type": "base64", "media_type": "text/markdown", "data": encoded}}
    conversion = convert([user([plain, markdown])])
    assert current(conversion)["content"] == "[Document: notes]\na\n\n[Document]\nb – ü"
    assert kinds(conversion).count("document_as_text") == 2


@pytest.mark.parametrize(
    ("source", "path", "problem"),
    [
        ({"type": "url", "url": "https://example.com/a.pdf"}, "source", "q2api does not fetch URLs"),
        ({"type": "file", "file_id": "file_1"}, "source", "Files API"),
        (
            {"type": "base64", "media_type": "application/msword", "data": "AAAA"},
            "source.media_type",
            "unsupported document type 'application/msword'",
        ),
    ],
)
def test_documents_that_cannot_travel_as_text_are_refused_not_replaced_by_a_note(source, path, problem):
    with pytest.raises(InvalidRequest) as caught:
        convert([user([{"type": "document", "source": source}])])
    assert caught.value.path == f"messages.0.content.0.{path}"
    assert problem in caught.value.problem
