"""requirements.lock against pyproject.toml, and who installs from it.

`scripts/lock --check` (run by .ci/run) re-resolves with uv against the package index; this checks
offline, in the quick tier, that no requirement was added or narrowed without re-locking.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)")


def locked_releases() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        match = PIN.match(line)
        if match:
            pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def project_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(text) for text in [*project["dependencies"], *extras["demo"], *extras["test"], *extras["docs"]]]


def test_the_lock_pins_every_requirement_at_a_release_its_range_allows() -> None:
    pins = locked_releases()
    for requirement in project_requirements():
        name = canonicalize_name(requirement.name)
        if name == "q2api":  # the test extra names the demo extra
            continue
        assert name in pins, f"{requirement} is not in requirements.lock: run scripts/lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"requirements.lock has {name}=={pins[name]}, outside {requirement}: run scripts/lock"
        )


def test_the_demo_sdks_are_an_extra_not_a_runtime_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {canonicalize_name(Requirement(text).name) for text in project["dependencies"]}
    demo = {canonicalize_name(Requirement(text).name) for text in project["optional-dependencies"]["demo"]}
    assert {"anthropic", "openai"} <= demo
    assert not runtime & {"anthropic", "openai"}
    assert "q2api[demo]" in project["optional-dependencies"]["test"]


def test_ci_the_readme_and_the_image_install_from_the_lock() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert 'pip install -c requirements.lock -e ".[demo,test]"' in readme
    # .ci/run's default run: `install` is `pip install --quiet -c requirements.lock`.
    assert 'install() { pip install --quiet -c requirements.lock "$@"; }' in ci
    assert '\ninstall -e ".[demo,test]"\n' in ci and 'install -e ".[docs]"' in ci
    assert "bash scripts/lock --check" in ci
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^COPY .*requirements\.lock", dockerfile, re.MULTILINE)
    assert "pip wheel --no-cache-dir --wheel-dir /wheels -c requirements.lock ." in dockerfile
    # The image runs the Python the lock is made for and CI tests on.
    assert "--python-version 3.11" in (ROOT / "scripts" / "lock").read_text()
    assert re.findall(r"^FROM python:(\S+)", dockerfile, re.MULTILINE) == ["3.11-slim", "3.11-slim"]


def test_the_unbounded_run_lifts_only_the_upper_bounds() -> None:
    spec = importlib.util.spec_from_file_location("without_upper_bounds", ROOT / "scripts" / "without_upper_bounds.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)

    assert script.without_upper_bound("uvicorn[standard]>=0.30,<0.55") == "uvicorn[standard]>=0.30"
    assert script.without_upper_bound("a>=1, <=2 ; python_version < '3.12'") == "a>=1 ; python_version < '3.12'"
    assert script.without_upper_bound("b~=1.4") == "b>=1.4"
    assert script.without_upper_bound("c>=1") is None
    assert script.without_upper_bound("d") is None
    lifted = script.unbounded(script.requirements(ROOT / "pyproject.toml"))
    assert "starlette>=0.40" in lifted and not any("<" in line for line in lifted)
