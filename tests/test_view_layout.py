"""Viewing is a front door: the library never depends on it, and it never on the CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .test_layout import PACKAGE, imported_modules


def test_the_agents_and_the_eval_store_never_import_the_viewer():
    for package in ("agents", "eval", "llm", "text", "data", "train"):
        for path in (PACKAGE / package).rglob("*.py"):
            bad = [n for n in imported_modules(path) if n.startswith("longread.view")]
            assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def test_the_viewer_knows_no_click_and_no_cli():
    for path in (PACKAGE / "view").rglob("*.py"):
        bad = [n for n in imported_modules(path) if n == "click" or n.startswith("longread.cli")]
        assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def test_the_command_line_loads_without_the_viewers_dependencies():
    # Every other command must work where the serve extra is not installed.
    code = (
        "import sys, longread.cli.main; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('starlette', 'uvicorn', 'jinja2') or m.startswith('longread.view')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr


def test_the_pages_files_are_package_data():
    # A template or asset the wheel leaves out works from a checkout and fails once installed.
    tomllib = pytest.importorskip("tomllib")
    with open(PACKAGE.parent.parent / "pyproject.toml", "rb") as handle:
        globs = tomllib.load(handle)["tool"]["setuptools"]["package-data"]["longread"]
    files = [p for folder in ("templates", "static") for p in (PACKAGE / "view" / folder).iterdir()]
    assert files
    for path in files:
        relative = path.relative_to(PACKAGE)
        assert any(relative.match(glob) for glob in globs), f"{relative} is not package data"
