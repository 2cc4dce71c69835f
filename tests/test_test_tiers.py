"""The `slow` marker follows what a test starts (tests/support/tiers.py), without a marker in the test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = [
    "tests/conversion/test_converter.py",
    "tests/amazonq/test_errors.py",
    "tests/cli/test_cli_basics.py",
    "tests/server/test_gateway_messages.py",
    "tests/cli/test_serve_operations.py",
    "tests/accounts/test_store_contract.py",
]


def collected(marker_expression: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--collect-only",  # with the configured -q: one line per test
            "-m",
            marker_expression,
            *FILES,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_quick_tier_keeps_example_tests_and_leaves_out_what_starts_something() -> None:
    quick, slow = collected("not slow"), collected("slow")

    expected_quick = [
        "tests/conversion/test_converter.py::test_consecutive_user_contents_merge",  # a pure stage
        "tests/amazonq/test_errors.py::test_header_code_wins_over_body",
        "tests/cli/test_cli_basics.py::test_version_prints_the_package_version",  # `main()` in process
    ]
    expected_slow = [
        "tests/amazonq/test_errors.py::test_sanitize_strips_any_namespace_and_suffix",  # hypothesis
        "tests/cli/test_cli_basics.py::test_the_console_entry_point_alone_prints_the_help_too",  # subprocess
        "tests/server/test_gateway_messages.py::test_create_returns_the_upstream_text_and_sends_a_conversation_state",
        "tests/cli/test_serve_operations.py::test_metrics_with_two_workers_sum_the_requests_of_both",  # serve
        "tests/accounts/test_store_contract.py::test_an_added_account_reads_back_whole",  # databases
    ]
    for test in expected_quick:
        assert test in quick and test not in slow, test
    for test in expected_slow:
        assert test in slow and test not in quick, test
