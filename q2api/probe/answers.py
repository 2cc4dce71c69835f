"""What an answer that is not a reply looks like, as a report may hold it: an error's shape, a web search's.

Pure: an `UpstreamHTTPError` (q2api.amazonq.errors) or an MCP answer in, plain redacted data out.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from q2api.amazonq.errors import UpstreamHTTPError, parse_error_reply
from q2api.amazonq.upstream import is_profile_refusal
from q2api.probe.redaction import Redactor
from q2api.probe.shapes import document_fields


@dataclasses.dataclass(frozen=True)
class ErrorShape:
    """A refusal: its status, code, reason and message (redacted), how q2api classifies it, its body's fields."""

    status: int
    code: str | None
    reason: str | None
    message: str | None
    kind: str  # q2api.amazonq.errors.FailureKind's value
    fields: tuple[str, ...]  # the body's key paths (`message`, `reason`, `__type`)
    needs_profile: bool  # the "profileArn is required for this request." refusal
    suspended: bool  # TEMPORARILY_SUSPENDED: the account, not the request

    @property
    def bearer_invalid(self) -> bool:
        return self.kind == "bearer_invalid"

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "code": self.code,
            "reason": self.reason,
            "message": self.message,
            "kind": self.kind,
            "fields": list(self.fields),
        }


def error_shape(error: UpstreamHTTPError, redactor: Redactor) -> ErrorShape:
    try:
        document = orjson.loads(error.body) if error.body else None
    except orjson.JSONDecodeError:
        document = None
    return ErrorShape(
        status=error.status,
        code=redactor.name(error.code) if error.code else None,
        reason=redactor.name(error.reason) if error.reason else None,
        message=redactor.message(error.message),
        kind=error.kind.value,
        fields=document_fields(document, redactor) if isinstance(document, dict) else (),
        needs_profile=is_profile_refusal(error),
        suspended=error.suspended,
    )


# How a web search answered (docs/protocol.md#web-search).
SEARCH_RESULTS = "results"  # a list of results
SEARCH_EMPTY = "empty_results"  # an empty `results` list and no error
SEARCH_INNER_ERROR = "inner_error"  # the inner JSON's `error` is set
SEARCH_TOOL_ERROR = "tool_error"  # `result.isError: true`
SEARCH_RPC_ERROR = "rpc_error"  # a JSON-RPC `error`
SEARCH_UNREADABLE = "unreadable"  # none of the documented shapes


@dataclasses.dataclass(frozen=True)
class SearchShape:
    answer: str  # one of the SEARCH_* values, or `http_<status>`
    results: int | None  # how many results, when it listed some or none
    fields: tuple[str, ...]  # the JSON-RPC answer's key paths
    inner_fields: tuple[str, ...]  # the key paths of the JSON inside `result.content[0].text`
    result_fields: tuple[str, ...]  # the fields of the results (union)
    error: ErrorShape | None = None
    rpc_code: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "results": self.results,
            "fields": list(self.fields),
            "inner_fields": list(self.inner_fields),
            "result_fields": list(self.result_fields),
            "error": self.error.as_dict() if self.error else None,
            "rpc_code": self.rpc_code,
        }


def search_shape(status: int, body: bytes, redactor: Redactor) -> SearchShape:
    """The shape of one MCP `tools/call web_search` answer; result titles, URLs and snippets are never kept."""
    if status != 200:
        error = error_shape(parse_error_reply(status, {}, body), redactor) if status != 599 else None
        return SearchShape(f"http_{status}", None, (), (), (), error)
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return SearchShape(SEARCH_UNREADABLE, None, (), (), ())
    if not isinstance(document, dict):
        return SearchShape(SEARCH_UNREADABLE, None, (), (), ())
    fields = document_fields(document, redactor)
    rpc_error = document.get("error")
    if rpc_error:
        code = rpc_error.get("code") if isinstance(rpc_error, dict) else None
        return SearchShape(SEARCH_RPC_ERROR, None, fields, (), (), rpc_code=code if isinstance(code, int) else None)
    found = document.get("result")
    result: dict[str, Any] = found if isinstance(found, dict) else {}
    if result.get("isError") is True:
        return SearchShape(SEARCH_TOOL_ERROR, None, fields, (), ())
    content = result.get("content")
    first = content[0] if isinstance(content, list) and content and isinstance(content[0], dict) else {}
    try:
        inner = orjson.loads(first["text"]) if isinstance(first.get("text"), str) else None
    except orjson.JSONDecodeError:
        inner = None
    if not isinstance(inner, dict):
        return SearchShape(SEARCH_UNREADABLE, None, fields, (), ())
    inner_fields = document_fields(inner, redactor)
    entries = [entry for entry in inner.get("results") or () if isinstance(entry, dict)]
    result_fields = redactor.names(key for entry in entries for key in entry)
    if isinstance(inner.get("error"), str) and inner["error"].strip():
        return SearchShape(SEARCH_INNER_ERROR, len(entries), fields, inner_fields, result_fields)
    answer = SEARCH_RESULTS if entries else SEARCH_EMPTY
    return SearchShape(answer, len(entries), fields, inner_fields, result_fields)
