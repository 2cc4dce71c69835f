"""A red run names what failed, always: a pytest plugin (tests/conftest.py uses it).

Formatting a failure parses Python source: pytest reads the statement around each line of the
traceback (`ast.parse`), and so does CPython 3.11's own traceback module, for its `^^^^` carets.
Before CPython 3.11.8 and 3.12.2 the AST constructor kept its recursion depth in state shared by
every thread (CPython gh-106905): pytest formatting one failure while a gateway thread formatted a
traceback of its own could raise `SystemError: AST constructor recursion depth mismatch` inside
pytest's report, which ended the run with an INTERNALERROR and left the failures before it unnamed.
Two guards:

* `serialise_ast_parse()`: on those releases, one thread at a time builds an AST;
* `pytest_runtest_makereport`: a failure whose traceback cannot be formatted all the same is
  reported in one line (where it failed, and the exception), and the run goes on.
"""

from __future__ import annotations

import ast
import functools
import sys
import threading
from collections.abc import Generator
from typing import Any

import pytest


def ast_constructor_is_shared_between_threads(version: tuple[int, int, int] | None = None) -> bool:
    """Whether this CPython builds ASTs with a recursion counter every thread shares (gh-106905)."""
    release = version or (sys.version_info.major, sys.version_info.minor, sys.version_info.micro)
    return (3, 11, 0) <= release < (3, 11, 8) or (3, 12, 0) <= release < (3, 12, 2)


def serialise_ast_parse() -> None:
    """On the affected releases, `ast.parse` (through which pytest and `traceback` build their ASTs)
    takes a lock; reentrant, since a finalizer run inside a parse may format a traceback too."""
    if not ast_constructor_is_shared_between_threads() or getattr(ast.parse, "serialised", False):
        return
    lock = threading.RLock()
    parse = ast.parse

    @functools.wraps(parse)
    def parse_alone(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return parse(*args, **kwargs)

    parse_alone.serialised = True  # type: ignore[attr-defined]
    ast.parse = parse_alone


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    try:
        return (yield)
    except Exception as problem:
        if call.excinfo is None:
            raise  # nothing failed: the report's own fault is the news
        return one_line_report(item, call, problem)


def one_line_report(item: pytest.Item, call: pytest.CallInfo[None], problem: Exception) -> pytest.TestReport:
    """The failure as `path:line: Exception: message`, without the traceback that could not be formatted."""
    excinfo = call.excinfo
    assert excinfo is not None and call.when != "collect"  # a test's phase: collection has reports of its own
    where = item.nodeid
    if excinfo.traceback:
        last = excinfo.traceback[-1]
        where = f"{last.path}:{last.lineno + 1}"
    longrepr = (
        f"{where}: {excinfo.exconly()}\n"
        f"(pytest could not format this failure's traceback: {type(problem).__name__}: {problem})"
    )
    return pytest.TestReport(
        nodeid=item.nodeid,
        location=item.location,
        keywords=dict.fromkeys(item.keywords, 1),
        outcome="failed",
        longrepr=longrepr,
        when=call.when,
        sections=[],
        duration=call.duration,
        start=call.start,
        stop=call.stop,
        user_properties=item.user_properties,
    )
