"""Tell a document's format from its first bytes; the file name only breaks ties."""

from __future__ import annotations

import re
import zipfile
from os import PathLike
from pathlib import PurePath
from typing import IO

from ...errors import UsageError

HEAD_BYTES = 8192
ZIP_MAGIC = b"PK\x03\x04"
EPUB_MIMETYPE = b"application/epub+zip"

# The start of an HTML page once a BOM, an XML declaration, a doctype's absence and comments
# are allowed for: a document tag, or one of the elements a fragment usually opens with.
_HTML_START = re.compile(
    rb"\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*"
    rb"<(?:!doctype\s+html|html|head|body|meta|title|div|p|h[1-6]|table|section|article)\b",
    re.IGNORECASE | re.DOTALL,
)
_MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd"}
_HTML_SUFFIXES = {".html", ".htm", ".xhtml"}


def sniff_format(head: bytes, filename: str) -> str:
    """The format of a document that starts with ``head`` (its first few KB) and is called
    ``filename``: "pdf", "epub", "docx", "html", "markdown" or "text", or "zip" for a zip
    archive whose head does not say (``zip_format`` looks inside).

    The content decides first (``%PDF-``; a zip whose first entry is EPUB's ``mimetype``, or
    that names ``word/document.xml``; an HTML tag at the start); the extension only breaks
    ties: ``.md``/``.markdown`` is markdown, ``.html`` starting with a tag is HTML, anything
    else is text (which the text reader refuses if it is binary)."""
    body = head.removeprefix(b"\xef\xbb\xbf")
    if body.lstrip()[:5] == b"%PDF-":
        return "pdf"
    if head.startswith(ZIP_MAGIC):
        if head[30:38] == b"mimetype" and head[38:58] == EPUB_MIMETYPE:
            return "epub"
        return "docx" if b"word/document.xml" in head else "zip"
    suffix = PurePath(filename).suffix.lower()
    if _HTML_START.match(body) or (suffix in _HTML_SUFFIXES and body.lstrip()[:1] == b"<"):
        return "html"
    return "markdown" if suffix in _MARKDOWN_SUFFIXES else "text"


def zip_format(file: str | PathLike[str] | IO[bytes], name: str) -> str:
    """ "epub" or "docx" for a zip archive, by what it holds; UsageError for a damaged one or
    one that is neither."""
    try:
        with zipfile.ZipFile(file) as archive:
            names = set(archive.namelist())
            if "mimetype" in names and archive.read("mimetype").strip() == EPUB_MIMETYPE:
                return "epub"
            if "word/document.xml" in names:
                return "docx"
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise UsageError(f"{name} is a damaged or truncated zip archive ({error})") from None
    raise UsageError(f"{name} is a zip archive but not an EPUB or DOCX")
