"""The import contracts (pyproject.toml, checked by `lint-imports`) cover the whole package, and the tests
share helpers only through tests/support.

A contract only guards the modules it names: a new top-level package or module missing from the
layers would be free to import anything, so this test fails until it is given its place.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "q2api"
# Outside the layers on purpose: the package's own marker and the `python -m q2api` entry point.
UNLAYERED = {"q2api.__init__", "q2api.__main__"}


def _layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (layers,) = [c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [name.strip() for layer in layers for name in layer.replace(":", "|").split("|")]


def test_every_top_level_package_and_module_has_a_layer():
    top_level = {f"q2api.{path.name}" for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    top_level |= {f"q2api.{path.stem}" for path in PACKAGE.glob("*.py")}
    assert sorted(top_level - UNLAYERED - set(_layers())) == []


def test_tests_share_helpers_through_tests_support_only():
    offending = []
    for path in (ROOT / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("tests.")
                and node.module.rsplit(".", 1)[-1].startswith("test_")
            ):
                offending.append(f"{path.relative_to(ROOT)} imports {node.module}")
    assert offending == []
