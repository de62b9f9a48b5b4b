"""PDF: the text layer, page by page, through PDFium (pypdfium2).

PDFium keeps the file open and loads one page at a time; each page and its text page are closed
before the next, so reading a 1,000-page report costs the memory of one page. Pages are joined
with a blank line. Where the PDF has an outline (bookmarks), each bookmark's title becomes the
section from the place on its page where the title's text appears (else from the page's start).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ..reading import Warn
from ._blocks import Block, require

# PDFium's line breaks are CRLF; U+FFFE and U+0002 mark hyphens it found at line ends.
_LINE_BREAK = re.compile(r"\r\n?")
_SOFT_HYPHENS = str.maketrans("", "", "\ufffe\x02\x00")


def open_pdf(path: str | Path, name: str) -> Any:
    """The PdfDocument, or UsageError for an encrypted, damaged or truncated file."""
    pdfium = require("pypdfium2", "PDF")
    try:
        return pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as error:
        code = getattr(error, "err_code", None)
        if code in (pdfium.raw.FPDF_ERR_PASSWORD, pdfium.raw.FPDF_ERR_SECURITY):
            raise UsageError(
                f"{name} is encrypted: decrypt it first (e.g. qpdf --decrypt)"
            ) from None
        raise UsageError(f"{name} is not a readable PDF (damaged or truncated)") from None


def pdf_blocks(path: str | Path, name: str, warn: Warn) -> Iterator[Block]:
    """Each page's text as blocks (page=N, 1-based); warns once about pages without text."""
    document = open_pdf(path, name)
    try:
        titles = _outline(document)
        blank = 0
        section: str | None = None
        for index in range(len(document)):
            text = _page_text(document, index)
            if not text:
                blank += 1
                continue
            for block in _split_at_titles(text, index + 1, section, titles.get(index, [])):
                section = block.section
                yield block
        pages = len(document)
        if blank and blank < pages:
            warn(f"{name}: {blank} of {pages} pages have no text layer (scanned?) and are skipped")
    finally:
        document.close()


def _page_text(document: Any, index: int) -> str:
    page = document[index]
    try:
        textpage = page.get_textpage()
        try:
            raw = textpage.get_text_range()
        finally:
            textpage.close()
    finally:
        page.close()
    return _LINE_BREAK.sub("\n", raw).translate(_SOFT_HYPHENS).strip()


def _outline(document: Any) -> dict[int, list[str]]:
    """Bookmark titles by the 0-based page they point at, in outline order."""
    titles: dict[int, list[str]] = defaultdict(list)
    try:
        for bookmark in document.get_toc():
            dest = bookmark.get_dest()
            title = " ".join((bookmark.get_title() or "").split())
            index = dest.get_index() if dest is not None else None
            if title and index is not None:
                titles[index].append(title)
    except Exception:  # a damaged outline loses the sections, never the text
        return {}
    return titles


def _split_at_titles(
    text: str, page: int, section: str | None, titles: list[str]
) -> Iterator[Block]:
    """The page as blocks: a new block (no separator) where each title's text starts."""
    start, separator, searched = 0, "\n\n", 0
    for title in titles:
        found = _find_title(text, title, searched)
        if found is None:
            section = title  # not on the page as text: it holds from the page's start
            continue
        if found > start:
            yield Block(text[start:found], page, section, separator)
            start, separator = found, ""
        section, searched = title, found + 1
    yield Block(text[start:], page, section, separator)


def _find_title(text: str, title: str, start: int) -> int | None:
    """Where ``title`` starts in ``text`` at or after ``start``, whitespace-insensitively."""
    words = [re.escape(word) for word in title.split()]
    match = re.compile(r"\s+".join(words)).search(text, start)
    return match.start() if match else None
