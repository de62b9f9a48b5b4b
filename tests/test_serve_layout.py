"""Serving is a front door: nothing in the library imports it, and it imports no CLI."""

from __future__ import annotations

import subprocess
import sys

from .test_layout import PACKAGE, imported_modules


def test_no_library_module_imports_serve():
    offenders = {
        str(path.relative_to(PACKAGE)): names
        for path in PACKAGE.rglob("*.py")
        if not {"serve", "cli"} & set(path.relative_to(PACKAGE).parts)
        if (names := sorted(n for n in imported_modules(path) if n.startswith("longread.serve")))
    }
    assert offenders == {}


def test_serve_imports_neither_click_nor_the_cli():
    for path in (PACKAGE / "serve").rglob("*.py"):
        bad = [
            n for n in imported_modules(path)
            if n.split(".")[0] == "click" or n.startswith("longread.cli")
        ]  # fmt: skip
        assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def test_the_command_line_loads_without_the_servers_dependencies():
    # Every other command must work where the serve extra is not installed.
    code = (
        "import sys, longread.cli.main; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('fastapi', 'starlette', 'uvicorn') or m.startswith('longread.serve')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr
