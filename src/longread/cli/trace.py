"""``longread trace migrate``: rewrite traces written by older longread versions in the current
step-record schema (they load without it; migrating saves the conversion on every read)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import UsageError
from ..trace import SCHEMA_VERSION, migrate_trace_file
from .errors import LongreadGroup


@click.group(name="trace", cls=LongreadGroup)
def trace_group() -> None:
    """Work with trace files (one step record per model call)."""


@trace_group.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
def migrate(paths: tuple[str, ...]) -> None:
    """Rewrite the traces at PATHS in the current schema, in place.

    A PATH is a trace JSON file, or a folder (e.g. an eval run folder): every ``*.json`` under
    its ``traces/`` folders, or under the folder itself when it has none.
    """
    files = [f for path in paths for f in _trace_files(Path(path))]
    changed = 0
    for file in files:
        try:
            changed += migrate_trace_file(file)
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{file} is not a longread trace ({exc!r})") from None
    click.echo(f"migrated {changed} of {len(files)} trace(s) to schema {SCHEMA_VERSION}")


def _trace_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    traces = sorted(path.rglob("traces/*.json"))
    return traces or sorted(p for p in path.rglob("*.json") if _looks_like_trace(p))


def _looks_like_trace(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and ("steps" in data or "conversations" in data)
