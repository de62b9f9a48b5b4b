"""Prompt templates, stored as package data files in named sets (``agents/prompts/<set>/``).

``paper`` (the default) words every prompt with the papers' semantics: the memory update is a
free rewrite that adds what helps and keeps what is relevant (ALGORITHMS.md sections 1-3).
``notes`` asks instead for append-only notes that copy the section's sentences verbatim, with a
worked example; it helps very small models keep a fact, and holds only the prompts it changes:
every other prompt comes from ``paper``. No prompt shows an example answer (models copy it).

Templates use ``string.Template`` placeholders (``$question``), so the literal braces of
``\\boxed{}`` need no escaping.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:  # importlib.resources.abc is Python 3.11+
    from importlib.abc import Traversable

DEFAULT_PROMPT_SET = "paper"
PROMPT_SETS = ("paper", "notes")


@dataclass(frozen=True)
class Prompts:
    """Where an agent's prompts come from: a bundled set, or a user's folder that holds every
    prompt the agent uses (same names as the bundled ones; a missing file is a UsageError)."""

    prompt_set: str = DEFAULT_PROMPT_SET
    directory: str | None = None

    def render(self, name: str, **fields: str) -> str:
        """Fill template ``name``; a missing field is a programmer error and raises KeyError."""
        return load_prompt(name, self.directory, self.prompt_set).substitute(**fields)


@cache
def load_prompt(
    name: str, directory: str | None = None, prompt_set: str = DEFAULT_PROMPT_SET
) -> Template:
    """Template ``name`` (without ``.txt``): from ``directory`` when one is given, else from the
    bundled ``prompt_set``, falling back to the default set for prompts the set does not
    change."""
    if directory:
        path = Path(directory) / f"{name}.txt"
        if not path.is_file():
            raise UsageError(f"prompt file not found: {path}")
        return Template(path.read_text(encoding="utf-8"))
    check_prompt_set(prompt_set)
    for folder in dict.fromkeys((prompt_set, DEFAULT_PROMPT_SET)):
        resource = _bundled(folder) / f"{name}.txt"
        if resource.is_file():
            return Template(resource.read_text(encoding="utf-8"))
    raise KeyError(f"no bundled prompt named {name!r}")


def check_prompt_set(prompt_set: str) -> str:
    """``prompt_set`` if it is a bundled set, else a UsageError listing them."""
    if prompt_set not in PROMPT_SETS:
        choices = ", ".join(PROMPT_SETS)
        raise UsageError(f"unknown prompt set {prompt_set!r}; choose one of {choices}")
    return prompt_set


def _bundled(prompt_set: str) -> Traversable:
    return importlib.resources.files("longread.agents") / "prompts" / prompt_set


def render(name: str, prompts: Prompts | None = None, **fields: str) -> str:
    """Fill template ``name`` from ``prompts`` (the default set when None)."""
    return (prompts or Prompts()).render(name, **fields)
