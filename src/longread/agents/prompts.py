"""Prompt templates, stored as package data files (``agents/prompts/*.txt``).

Templates use ``string.Template`` placeholders (``$question``), so the literal braces of
``\\boxed{}`` need no escaping.
"""

from __future__ import annotations

import importlib.resources
from functools import cache
from pathlib import Path
from string import Template

from ..errors import UsageError


@cache
def load_prompt(name: str, directory: str | None = None) -> Template:
    """Template ``name`` (without ``.txt``) from ``directory`` or from the package's prompts."""
    if directory:
        path = Path(directory) / f"{name}.txt"
        if not path.is_file():
            raise UsageError(f"prompt file not found: {path}")
        return Template(path.read_text(encoding="utf-8"))
    resource = importlib.resources.files("longread.agents") / "prompts" / f"{name}.txt"
    return Template(resource.read_text(encoding="utf-8"))


def render(name: str, directory: str | None = None, **fields: str) -> str:
    """Fill template ``name``; a missing field is a programmer error and raises KeyError."""
    return load_prompt(name, directory).substitute(**fields)
