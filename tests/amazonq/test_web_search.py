"""Kiro's MCP web search answer → a search outcome (q2api.amazonq.web_search), and the request it sends."""

from __future__ import annotations

import re

import orjson
import pytest

from q2api.amazonq.web_search import (
    PROFILE_HEADER,
    SearchError,
    SearchResult,
    mcp_headers,
    mcp_request,
    parse_mcp_answer,
)


def answer(inner: object, *, is_error: bool = False) -> bytes:
    text = inner if isinstance(inner, str) else orjson.dumps(inner).decode()
    return orjson.dumps(
        {"id": "x", "jsonrpc": "2.0", "result": {"content": [{"type": "text", "text": text}], "isError": is_error}}
    )


def test_the_request_is_kiros_json_rpc_call_with_the_profile_in_body_and_header() -> None:
    body = mcp_request("rust news", "arn:aws:codewhisperer:us-east-1:1:profile/P", now_ms=1_700_000_000_000)
    assert re.fullmatch(r"web_search_tooluse_[A-Za-z0-9]{22}_1700000000000_[a-z0-9]{8}", body["id"])
    assert body["method"] == "tools/call" and body["jsonrpc"] == "2.0"
    assert body["params"] == {"name": "web_search", "arguments": {"query": "rust news"}}
    assert body["profileArn"] == "arn:aws:codewhisperer:us-east-1:1:profile/P"
    headers = mcp_headers("token", "arn:aws:codewhisperer:us-east-1:1:profile/P")
    assert headers[PROFILE_HEADER] == "arn:aws:codewhisperer:us-east-1:1:profile/P"
    assert headers["Authorization"] == "Bearer token" and headers["Content-Type"] == "application/json"
    assert "profileArn" not in mcp_request("q", None) and PROFILE_HEADER not in mcp_headers("t", None)


def test_results_are_read_from_the_json_string_inside_the_result() -> None:
    inner = {
        "results": [
            {
                "title": "A",
                "url": "https://a.test/1",
                "snippet": "about a",
                "publishedDate": 1767225600000,
                "domain": "a.test",
            },
            {"url": "https://b.test/"},  # no title: the URL stands in
            {"title": "no url"},  # skipped
            "junk",
        ],
        "totalResults": 3,
        "query": "q",
    }
    outcome = parse_mcp_answer(200, answer(inner))
    assert outcome.error is None
    assert outcome.results == (
        SearchResult("A", "https://a.test/1", "about a", 1767225600000, "a.test"),
        SearchResult("https://b.test/", "https://b.test/"),
    )


def test_no_results_is_an_empty_search_not_a_failure() -> None:
    outcome = parse_mcp_answer(200, answer({"results": [], "totalResults": 0, "query": "q"}))
    assert outcome.results == () and outcome.error is None


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (
            200,
            orjson.dumps({"id": "x", "jsonrpc": "2.0", "error": {"code": -32000, "message": "down"}}),
            SearchError.UNAVAILABLE,
        ),
        (200, answer("boom", is_error=True), SearchError.UNAVAILABLE),
        (200, answer({"results": [], "error": "backend failed"}), SearchError.UNAVAILABLE),
        (200, answer("not json"), SearchError.UNAVAILABLE),
        (200, b"<html>", SearchError.UNAVAILABLE),
        (200, b"[]", SearchError.UNAVAILABLE),
        (429, b'{"message":"Rate exceeded"}', SearchError.TOO_MANY_REQUESTS),
        (500, b"{}", SearchError.UNAVAILABLE),
        (403, b'{"message":"The bearer token included in the request is invalid."}', SearchError.UNAVAILABLE),
    ],
)
def test_failures_are_outcomes_with_an_anthropic_error_code(status: int, body: bytes, error: SearchError) -> None:
    outcome = parse_mcp_answer(status, body)
    assert outcome.results is None and outcome.error is error and outcome.detail
