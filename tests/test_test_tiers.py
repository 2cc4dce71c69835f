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
    "tests/server/test_fault_matrix.py",
    "tests/cli/test_serve_operations.py",
    "tests/accounts/test_store_contract.py",
    "tests/tenants/test_keys_and_counters.py",
]


def collected(*marker_expressions: str) -> list[str]:
    """The tests each expression selects in FILES (collected side by side: each run imports the suite)."""
    runs = [
        subprocess.Popen(
            # with the configured -q: one line per test
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-m", expression, *FILES],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for expression in marker_expressions
    ]
    outputs = []
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, out + err
        outputs.append(out)
    return outputs


def test_the_quick_tier_keeps_example_tests_and_leaves_out_what_starts_something() -> None:
    quick, slow = collected("not slow", "slow")

    expected_quick = [
        "tests/conversion/test_converter.py::test_consecutive_user_contents_merge",  # a pure stage
        "tests/amazonq/test_errors.py::test_header_code_wins_over_body",
        "tests/cli/test_cli_basics.py::test_version_prints_the_package_version",  # `main()` in process
        # the gateway in this process, on a loopback port
        "tests/server/test_gateway_messages.py::test_create_returns_the_upstream_text_and_sends_a_conversation_state",
        # a store test on SQLite: no database server
        "tests/accounts/test_store_contract.py::test_an_added_account_reads_back_whole[sqlite]",
        "tests/tenants/test_keys_and_counters.py::test_rpm_admits_exactly_the_limit_then_refuses_until_the_next_minute[sqlite-store]",
    ]
    expected_slow = [
        "tests/amazonq/test_errors.py::test_sanitize_strips_any_namespace_and_suffix",  # hypothesis
        "tests/cli/test_cli_basics.py::test_the_console_entry_point_alone_prints_the_help_too",  # subprocess
        "tests/cli/test_serve_operations.py::test_metrics_with_two_workers_sum_the_requests_of_both",  # serve
        "tests/accounts/test_store_contract.py::test_an_added_account_reads_back_whole[postgresql]",  # databases
        "tests/tenants/test_keys_and_counters.py::test_rpm_admits_exactly_the_limit_then_refuses_until_the_next_minute[postgresql-store]",
        "tests/server/test_fault_matrix.py::test_client_leaves",  # waits on purpose: marked by hand
    ]
    for test in expected_quick:
        assert test in quick and test not in slow, test
    for test in expected_slow:
        assert test in slow and test not in quick, test
