"""docs/probe.md documents every step and every field of the report, and docs/protocol.md links each
probe step that settles one of the simulator's assumptions."""

from __future__ import annotations

import re
from pathlib import Path

from q2api.probe.report import AccountReport, ProbeReport
from q2api.probe.steps import ProbeStep
from q2api.testing.assumptions import SIMULATOR

DOCS = Path(__file__).resolve().parents[2] / "docs"
PROBE = (DOCS / "probe.md").read_text()
PROTOCOL = (DOCS / "protocol.md").read_text()


def test_every_step_has_its_section():
    headings = set(re.findall(r"^### `(\w+)`$", PROBE, re.MULTILINE))
    assert headings == {step.value for step in ProbeStep}


def test_every_field_of_the_report_is_documented():
    report = ProbeReport(limits=False).as_dict()
    account = AccountReport("a", "idc", None, "us-east-1", False, None, None, 20).as_dict()
    documented = set(re.findall(r"`(\w+)(?:\[\])?`", PROBE))
    assert set(report) - documented == set()
    assert set(account) - documented == set()


def test_the_protocol_page_links_each_step_that_observes_an_assumption():
    steps = {assumption.step.value for assumption in SIMULATOR.values() if assumption.step is not None}
    linked = set(re.findall(r"\]\(probe\.md#(\w+)\)", PROTOCOL))
    assert steps - linked == set()
