"""Which tests are `slow`: property tests, and tests that start a process, a browser or a database
connection, or that wait on purpose.

`pytest -m "not slow"` runs the rest — the pure stages, the unit tests, and the gateway itself (in
this process, on a loopback port: tens of milliseconds) with every package's behaviour through it —
for the edit-test loop; plain `pytest` (the README's test command, `.ci/run`) runs everything.
Nobody has to remember the marker: a test is slow when it is a hypothesis test, or when its code,
its fixtures' code, or the code of the test helpers they call (functions and classes of `tests.*`,
followed through their global names) uses one of `SLOW_MODULES` — except a database test run on
SQLite (a parameter `sqlite` and none naming a database server). A test that waits on purpose (a
timeout, a scripted pause, a rate window) takes `@pytest.mark.slow` by hand; a quick-tier run lists
the quick tests that took over `QUICK_TEST_SECONDS` (tests/conftest.py).
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import hypothesis
import pytest

# Property tests try hundreds of examples each: when the tiers were introduced, 45 of them took 81 s
# of the 97 s of the tests that start nothing; run a stage's property file by path
# (`pytest tests/conversion/test_converter_properties.py`) while working on that stage.
PROPERTY_TEST = "a property test (hypothesis): hundreds of examples"
# What makes a test slow, by the module it comes from.
DATABASE_SERVER = "a PostgreSQL or MariaDB server"
SLOW_MODULES = MappingProxyType(
    {
        "tests.support.serve_process": "`q2api serve` processes",
        "subprocess": "a process",
        "multiprocessing": "a process",
        "tests.support.browser": "a headless chromium",
        "tests.support.databases": DATABASE_SERVER,
    }
)
# The parameters that name where a store test runs: SQLite needs no server.
_SERVER_KINDS = frozenset({"postgresql", "mysql"})
# A quick test that takes longer than this (set up, run and torn down) belongs in the slow tier.
QUICK_TEST_SECONDS = 1.0
_FOLLOWED_PACKAGE = "tests."  # helpers followed into; library code is judged by its module alone


def slow_reason(item: pytest.Item) -> str | None:
    """Why `item` is slow (what it starts), or None when it starts none of those."""
    if not isinstance(item, pytest.Function):
        return None
    test = getattr(item.function, "__func__", item.function)  # a test in a class is a bound method
    if hypothesis.is_hypothesis_test(test):
        return PROPERTY_TEST
    ignored = frozenset({DATABASE_SERVER}) if _on_sqlite(item) else frozenset()
    seen: set[int] = set()
    for function in [inspect.unwrap(test), *_fixture_functions(item)]:
        reason = _reason_in(function, seen, ignored)
        if reason is not None:
            return reason
    return None


def _on_sqlite(item: pytest.Function) -> bool:
    """Whether `item` is the SQLite instance of a test run on each store (`[sqlite]`, `[sqlite-redis]`)."""
    callspec = getattr(item, "callspec", None)
    values = {value for value in callspec.params.values() if isinstance(value, str)} if callspec else set()
    return "sqlite" in values and not values & _SERVER_KINDS


def _fixture_functions(item: pytest.Function) -> Iterator[Any]:
    """The functions of the fixtures `item` uses, from its module and the conftest modules above it."""
    holders = [item.module, *_conftest_modules(item)]
    for name in item.fixturenames:
        for holder in holders:
            fixture = getattr(holder, name, None)
            if fixture is not None:
                yield inspect.unwrap(fixture)
                break


def _conftest_modules(item: pytest.Function) -> Iterator[types.ModuleType]:
    root = item.config.rootpath
    directory = Path(item.path).parent
    while directory.is_relative_to(root) and directory != root:
        module = sys.modules.get(".".join((*directory.relative_to(root).parts, "conftest")))
        if module is not None:
            yield module
        directory = directory.parent


def _reason_in(thing: Any, seen: set[int], ignored: frozenset[str]) -> str | None:
    """Whether `thing` (a value a global name holds) is or leads to one of SLOW_MODULES (but `ignored`)."""
    if id(thing) in seen:
        return None
    seen.add(id(thing))
    module_name = thing.__name__ if isinstance(thing, types.ModuleType) else getattr(thing, "__module__", None)
    if not isinstance(module_name, str):
        return None
    for slow_module, reason in SLOW_MODULES.items():
        if module_name == slow_module or module_name.startswith(slow_module + "."):
            return reason if reason not in ignored else None
    if not module_name.startswith(_FOLLOWED_PACKAGE) or isinstance(thing, types.ModuleType):
        return None
    if isinstance(thing, type):
        members = [inspect.unwrap(member) for member in vars(thing).values() if inspect.isfunction(member)]
        return next(filter(None, (_reason_in(member, seen, ignored) for member in members)), None)
    if inspect.isfunction(thing):
        function = inspect.unwrap(thing)  # a decorated helper (`@asynccontextmanager`): its own code, not the wrapper's
        return _reason_in_code(function.__code__, function.__globals__, seen, ignored)
    return None


def _reason_in_code(
    code: types.CodeType, namespace: dict[str, Any], seen: set[int], ignored: frozenset[str]
) -> str | None:
    for name in code.co_names:
        if name in namespace:
            reason = _reason_in(namespace[name], seen, ignored)
            if reason is not None:
                return reason
    for constant in code.co_consts:  # nested functions, lambdas, comprehensions
        if isinstance(constant, types.CodeType):
            reason = _reason_in_code(constant, namespace, seen, ignored)
            if reason is not None:
                return reason
    return None
