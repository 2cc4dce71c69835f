"""Shared fixtures.

`gw`: a gateway with default settings on a fresh simulator (tests/support/gateway_harness.py).
`log_lines`: every loguru line (TRACE and up) with its bound fields, as text.
Property tests, and tests that start a process, a browser or a database connection, are marked `slow`
(tests/support/tiers.py): `pytest -m "not slow"` is the quick tier, which lists its tests over a second.
A failure is always named, even when its traceback cannot be formatted (tests/support/failure_reports.py).
HTTP clients share one default TLS context (tests/support/shared_tls.py).
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator, Iterator

import pytest
from loguru import logger

from tests.support.failure_reports import (
    pytest_runtest_makereport,  # noqa: F401 (a hook: found here by name)
    serialise_ast_parse,
)
from tests.support.gateway_harness import Gateway, open_gateway
from tests.support.shared_tls import share_default_tls_context
from tests.support.tiers import QUICK_TEST_SECONDS, slow_reason

serialise_ast_parse()  # before any test starts a thread
share_default_tls_context()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if slow_reason(item) is not None:
            item.add_marker(pytest.mark.slow)


_quick_seconds: collections.Counter[str] = collections.Counter()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "slow" not in report.keywords:
        _quick_seconds[report.nodeid] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """After a quick-tier run, the quick tests that were not: the tier stays quick by marking them."""
    if config.getoption("markexpr") != "not slow":
        return
    late = [(seconds, test) for test, seconds in _quick_seconds.items() if seconds > QUICK_TEST_SECONDS]
    if late:
        terminalreporter.write_sep(
            "-", f"quick tests over {QUICK_TEST_SECONDS:g} s: mark them slow (tests/support/tiers.py)"
        )
        for seconds, test in sorted(late, reverse=True):
            terminalreporter.write_line(f"{seconds:5.1f} s  {test}")


@pytest.fixture
async def gw(tmp_path) -> AsyncIterator[Gateway]:
    async with open_gateway(tmp_path) as gateway:
        yield gateway


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message) + repr(message.record["extra"])), level="TRACE")
    yield lines
    logger.remove(sink)
