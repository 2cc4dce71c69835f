"""What a test run promises besides the tests: a red run names every failure, even one whose traceback
cannot be formatted (tests/support/failure_reports.py), and the Redis tests touch only their own keys
(tests/support/tenant_stores.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from tests.support.failure_reports import ast_constructor_is_shared_between_threads
from tests.support.tenant_stores import REDIS_URL, scratch_redis

ROOT = Path(__file__).resolve().parent.parent
SOURCE = "\n".join(f"def f{n}(a, b):\n    return [x * {n} for x in range(a) if (x + b) % 3 == 0]" for n in range(200))


class _Churn:
    def __del__(self) -> None:
        sum(range(50))  # Python code run by the collector, inside whatever allocation set it off


def test_threads_building_asts_at_once_never_see_the_constructors_recursion_error() -> None:
    """Two threads parse while garbage with finalizers is collected (the interpreter may switch threads
    inside the AST constructor then): on CPython 3.11.0–3.11.7 this raised `SystemError: AST constructor
    recursion depth mismatch` within a fraction of a second, before conftest serialised `ast.parse`."""
    errors: list[BaseException] = []
    stop = time.monotonic() + 1.5

    def parse() -> None:
        while time.monotonic() < stop and not errors:
            garbage = [_Churn() for _ in range(50)]
            for item in garbage:
                item.cycle = item  # type: ignore[attr-defined]  # freed by the collector only
            del garbage
            try:
                ast.parse(SOURCE)
            except SystemError as exc:
                errors.append(exc)

    threads = [threading.Thread(target=parse) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_the_releases_with_a_shared_ast_constructor_are_the_ones_guarded() -> None:
    assert ast_constructor_is_shared_between_threads((3, 11, 7))
    assert ast_constructor_is_shared_between_threads((3, 12, 1))
    assert not ast_constructor_is_shared_between_threads((3, 11, 8))
    assert not ast_constructor_is_shared_between_threads((3, 12, 2))
    assert not ast_constructor_is_shared_between_threads((3, 13, 0))


# pytest parses the source around each line of a traceback (`ast.parse`): here that fails as it did
# on 3.11.7 when another thread built an AST at the same moment.
FAILING_RUN = """
import ast


def test_whose_traceback_cannot_be_formatted(monkeypatch):
    def broken(*args, **kwargs):
        raise SystemError("AST constructor recursion depth mismatch (before=18, after=8)")

    monkeypatch.setattr(ast, "parse", broken)
    assert 6 * 7 == 41


def test_after_it():
    pass
"""


def test_a_failure_whose_traceback_cannot_be_formatted_is_still_named_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(FAILING_RUN)
    plugin, options = (
        ["-p", "tests.support.failure_reports", "-p", "no:cacheprovider"],
        ["-n", "0", "-rfE", "--tb=short"],
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *plugin, *options, "--rootdir", str(tmp_path), "test_inner.py"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output  # failed tests; 3 would be pytest's own internal error
    assert "INTERNALERROR" not in output
    assert "FAILED test_inner.py::test_whose_traceback_cannot_be_formatted" in output
    line = FAILING_RUN.splitlines().index("    assert 6 * 7 == 41") + 1
    assert f"test_inner.py:{line}: AssertionError: assert (6 * 7) == 41" in output  # where, and what
    assert "1 failed, 1 passed" in output


def test_a_redis_test_deletes_its_own_keys_and_nothing_else() -> None:
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        with scratch_redis() as place, scratch_redis() as neighbour:
            assert place.prefix != neighbour.prefix and not neighbour.prefix.startswith(place.prefix + ":")
            client.set(f"{place.prefix}:tenants:{{key_a}}:requests:60", 1)
            client.set(f"{neighbour.prefix}:tenants:{{key_a}}:requests:60", 1)
            someone_elses = f"q2api:tenants:{{key_test_runs_{place.prefix}}}:requests:60"
            client.set(someone_elses, 1, ex=60)
        assert client.exists(f"{place.prefix}:tenants:{{key_a}}:requests:60") == 0
        assert client.exists(f"{neighbour.prefix}:tenants:{{key_a}}:requests:60") == 0
        assert client.get(someone_elses) == b"1"  # a key of another deployment or run: untouched
        client.delete(someone_elses)
    except redis.exceptions.ConnectionError as exc:
        pytest.skip(f"no Redis server at {REDIS_URL}: {type(exc).__name__}")
    finally:
        client.close()
