"""Which tests are `slow`: property tests, and tests that start a gateway, a process, a browser or a
database connection.

`pytest -m "not slow"` runs the rest — the example-based tests of the pure stages and the unit
tests — for the edit-test loop; plain `pytest` (the README's test command, `.ci/run`) runs
everything. Nobody has to remember the marker: a test is slow when it is a hypothesis test, or when
its code, its fixtures' code, or the code of the test helpers they call (functions and classes of
`tests.*`, followed through their global names) uses one of `SLOW_MODULES`. A slow test this cannot
see takes `@pytest.mark.slow` by hand.
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
SLOW_MODULES = MappingProxyType(
    {
        "tests.support.gateway_harness": "a gateway on a loopback port",
        "tests.support.openai_harness": "a gateway on a loopback port",
        "q2api.testing.gateway_server": "a gateway on a loopback port",
        "tests.support.serve_process": "`q2api serve` processes",
        "subprocess": "a process",
        "multiprocessing": "a process",
        "tests.support.browser": "a headless chromium",
        "tests.support.databases": "a PostgreSQL or MariaDB server",
    }
)
_FOLLOWED_PACKAGE = "tests."  # helpers followed into; library code is judged by its module alone


def slow_reason(item: pytest.Item) -> str | None:
    """Why `item` is slow (what it starts), or None when it starts none of those."""
    if not isinstance(item, pytest.Function):
        return None
    test = getattr(item.function, "__func__", item.function)  # a test in a class is a bound method
    if hypothesis.is_hypothesis_test(test):
        return PROPERTY_TEST
    seen: set[int] = set()
    for function in [inspect.unwrap(test), *_fixture_functions(item)]:
        reason = _reason_in(function, seen)
        if reason is not None:
            return reason
    return None


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


def _reason_in(thing: Any, seen: set[int]) -> str | None:
    """Whether `thing` (a value a global name holds) is or leads to one of SLOW_MODULES."""
    if id(thing) in seen:
        return None
    seen.add(id(thing))
    module_name = thing.__name__ if isinstance(thing, types.ModuleType) else getattr(thing, "__module__", None)
    if not isinstance(module_name, str):
        return None
    for slow_module, reason in SLOW_MODULES.items():
        if module_name == slow_module or module_name.startswith(slow_module + "."):
            return reason
    if not module_name.startswith(_FOLLOWED_PACKAGE) or isinstance(thing, types.ModuleType):
        return None
    if isinstance(thing, type):
        members = [inspect.unwrap(member) for member in vars(thing).values() if inspect.isfunction(member)]
        return next(filter(None, (_reason_in(member, seen) for member in members)), None)
    if inspect.isfunction(thing):
        function = inspect.unwrap(thing)  # a decorated helper (`@asynccontextmanager`): its own code, not the wrapper's
        return _reason_in_code(function.__code__, function.__globals__, seen)
    return None


def _reason_in_code(code: types.CodeType, namespace: dict[str, Any], seen: set[int]) -> str | None:
    for name in code.co_names:
        if name in namespace:
            reason = _reason_in(namespace[name], seen)
            if reason is not None:
                return reason
    for constant in code.co_consts:  # nested functions, lambdas, comprehensions
        if isinstance(constant, types.CodeType):
            reason = _reason_in_code(constant, namespace, seen)
            if reason is not None:
                return reason
    return None
