"""One way in for every format: ``open_document`` sniffs the file and streams its text."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import UsageError
from ..positions import PositionMap
from ..reading import Warn, cannot_open, read_document
from ._blocks import join_blocks
from .sniff import HEAD_BYTES, sniff_format, zip_format

log = logging.getLogger(__name__)

FORMATS = ("pdf", "html", "epub", "docx", "markdown", "text")


@dataclass
class DocumentText:
    """A document's text, streamed: ``"".join(pieces)`` is the text the chunker cuts, and
    ``positions`` (pages, sections) is filled as the pieces are consumed, complete once
    they are exhausted. Errors found while reading (no text at all) are raised by the
    pieces' iterator."""

    format: str
    pieces: Iterator[str]
    positions: PositionMap = field(default_factory=PositionMap)


def open_document(
    path: str | Path,
    *,
    name: str | None = None,
    max_bytes: int | None = None,
    warn: Warn | None = None,
) -> DocumentText:
    """Open ``path`` (``"-"``: standard input, read as text) in whichever format its content
    shows (see ``sniff_format``). Raises UsageError now for a missing, unreadable or too
    large file (over ``max_bytes``), a zip that is neither EPUB nor DOCX, an encrypted or
    damaged PDF, and while reading for a file without text. Messages call it ``name``."""
    name = name or ("stdin" if str(path) == "-" else str(path))
    warn = warn or log.warning
    if str(path) == "-":
        return DocumentText("text", read_document(path, warn=warn, name=name))
    fmt = _format_of(Path(path), name, max_bytes)
    positions = PositionMap()
    return DocumentText(fmt, _pieces(fmt, path, name, warn, positions), positions)


def _format_of(path: Path, name: str, max_bytes: int | None) -> str:
    try:
        size = path.stat().st_size
        with open(path, "rb") as stream:
            head = stream.read(HEAD_BYTES)
    except OSError as error:
        raise cannot_open(error, name, "a document") from None
    if max_bytes is not None and size > max_bytes:
        raise UsageError(f"{name} is {_size(size)}, over the limit of {_size(max_bytes)}")
    fmt = sniff_format(head, path.name)
    # A zip's head can mislead (a truncated DOCX still starts like one): its directory decides.
    return zip_format(path, name) if fmt in ("zip", "epub", "docx") else fmt


def _pieces(
    fmt: str, path: str | Path, name: str, warn: Warn, positions: PositionMap
) -> Iterator[str]:
    """The text of a document of format ``fmt``; the readers are imported only when needed,
    so a missing optional library fails only for its own format."""
    if fmt == "text":
        return read_document(path, warn=warn, name=name)
    if fmt == "markdown":
        from .markdown import markdown_pieces

        return markdown_pieces(path, name, warn, positions)
    if fmt == "pdf":
        from .pdf import open_pdf, pdf_blocks

        open_pdf(path, name).close()  # refuse an encrypted or damaged file now, not later
        blocks = pdf_blocks(path, name, warn)
        empty = "has no text layer: run OCR first (e.g. ocrmypdf)"
    elif fmt == "html":
        from .html import decode_html, html_blocks

        blocks = html_blocks(decode_html(Path(path).read_bytes()))
        empty = "holds no text"
    elif fmt == "epub":
        from .epub import epub_blocks

        blocks = epub_blocks(path, name, warn)
        empty = "holds no text"
    else:
        from .word import docx_blocks

        blocks = docx_blocks(path, name)
        empty = "holds no text"
    return join_blocks(blocks, positions, name=name, empty=empty)


def check_document_text(
    path: str | Path, *, name: str | None = None, max_bytes: int | None = None
) -> str:
    """Raise UsageError now if ``path`` cannot give text (see ``open_document``): reads up to
    the first words only (a PDF's first page with text; every page of an image-only one), so
    a bad file is refused before any model is loaded. Returns the format."""
    document = open_document(path, name=name, max_bytes=max_bytes, warn=lambda _: None)
    try:
        for piece in document.pieces:
            if not piece.isspace():
                break
    finally:
        close = getattr(document.pieces, "close", None)
        if close is not None:
            close()  # lets a PDF reader close its file now
    return document.format


def document_from_bytes(data: bytes, *, name: str) -> tuple[str, PositionMap, str]:
    """``(text, positions, format)`` of a whole document held in memory (an upload): written
    to a temporary file and read like any other. ``name`` is the upload's file name (its
    extension breaks ties; messages use it)."""
    suffix = Path(name).suffix if len(Path(name).suffix) <= 16 else ""
    descriptor, temporary = tempfile.mkstemp(prefix="longread-upload-", suffix=suffix)
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
        document = open_document(temporary, name=name, warn=log.warning)
        text = "".join(document.pieces)
        return text, document.positions, document.format
    finally:
        os.unlink(temporary)


def _size(count: int) -> str:
    return f"{count / 1e6:,.1f} MB" if count >= 100_000 else f"{count:,} bytes"
