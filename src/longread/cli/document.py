"""The document ``longread ask`` reads, checked before any model is contacted."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click

from ..errors import UsageError
from ..text.formats import check_document_text

STDIN = "-"
MB = 1_000_000
_COPY_BLOCK = 1 << 20


@contextlib.contextmanager
def checked_document(file: str, *, max_mb: float | None = None) -> Iterator[tuple[str, str]]:
    """``(path, name)`` of ``file`` once it is known to hold text, in whichever format it is
    (PDF, HTML, EPUB, DOCX, Markdown, text): missing, unreadable, binary, empty, encrypted,
    damaged and image-only documents, and files over ``max_mb`` megabytes (checked from the
    size, before reading), are refused here (UsageError), before a server is asked anything
    or a model loaded. Standard input (``-``) is first copied to a temporary file, which is
    read instead and removed afterwards: it could not be checked otherwise without being
    consumed."""
    limit = None if max_mb is None else int(max_mb * MB)
    if file != STDIN:
        _refuse_over_limit(file, os.stat(file).st_size, max_mb)
        check_document_text(file, max_bytes=limit)
        yield file, file
        return
    with tempfile.TemporaryDirectory(prefix="longread-stdin-") as folder:
        path = Path(folder) / "stdin"
        try:
            _copy_stdin(path, limit, max_mb)
        except KeyboardInterrupt:  # Ctrl-C while a pipe is still writing
            click.echo("longread: interrupted", err=True)
            sys.exit(130)
        check_document_text(path, name="stdin")
        yield str(path), "stdin"


def _copy_stdin(path: Path, limit: int | None, max_mb: float | None) -> None:
    """Standard input into ``path``, stopping as soon as it is over ``limit`` bytes."""
    copied = 0
    with open(path, "wb") as copy:
        while block := sys.stdin.buffer.read(_COPY_BLOCK):
            copied += len(block)
            if limit is not None and copied > limit:
                _refuse_over_limit("stdin", copied, max_mb, at_least=True)
            copy.write(block)


def _refuse_over_limit(
    name: str, size: int, max_mb: float | None, *, at_least: bool = False
) -> None:
    """UsageError if ``size`` bytes (``at_least`` that many: a stream cut short) is over the
    limit."""
    if max_mb is None or size <= max_mb * MB:
        return
    shown = f"{size / MB:,.1f} MB" if size >= MB / 10 else f"{size:,} bytes"
    what = f"over {shown}" if at_least else shown
    raise UsageError(f"{name} is {what}, more than --max-document-mb {max_mb:g}")
