"""The document ``longread ask`` reads, checked before any model is contacted."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click

from ..text.reading import check_document

STDIN = "-"


@contextlib.contextmanager
def checked_document(file: str) -> Iterator[tuple[str, str]]:
    """``(path, name)`` of ``file`` once it is known to hold text: missing, unreadable, binary,
    empty and whitespace-only documents are refused here (UsageError), before a server is
    asked anything or a model loaded. Standard input (``-``) is first copied to a temporary
    file, which is read instead and removed afterwards: it could not be checked otherwise
    without being consumed."""
    if file != STDIN:
        check_document(file)
        yield file, file
        return
    with tempfile.TemporaryDirectory(prefix="longread-stdin-") as folder:
        path = Path(folder) / "stdin.txt"
        try:
            with open(path, "wb") as copy:
                shutil.copyfileobj(sys.stdin.buffer, copy, 1 << 20)
        except KeyboardInterrupt:  # Ctrl-C while a pipe is still writing
            click.echo("longread: interrupted", err=True)
            sys.exit(130)
        check_document(path, name="stdin")
        yield str(path), "stdin"
