"""A run's citations as clients read them: the ``citations`` list of the ``longread`` field
(document offsets, page, section, and the file each one is in) and OpenAI's ``url_citation``
annotations on the message.

An annotation's URL points into the file the client sent: ``file:report.pdf#page=2`` (a PDF
open parameter) where the document has pages, else ``file:notes.md#char=120,180`` (an RFC 5147
fragment; offsets in that file's extracted text). A document sent as text (``longread.document``
or earlier messages) has no file name: its URLs say ``file:document``. Every annotation spans
the whole answer (``start_index`` 0 to its length): longread cites the answer as one claim.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from ..citations.model import Citation
from ..trace import Run
from .documents import DocumentFile, file_at

UNNAMED = "document"  # what a text document (no file part) is called in URLs and titles


def citation_fields(run: Run, files: tuple[DocumentFile, ...]) -> list[dict[str, Any]]:
    """The ``longread.citations`` list: ``quote``, ``page``, ``section``, ``char_start``,
    ``char_end`` (offsets in the joined document's text), ``chunk``, and ``file`` (the name of
    the file part it is in; None when the document came as text)."""
    fields = []
    for citation in run.citations:
        found = file_at(files, citation.char_start)
        fields.append(
            {
                "quote": citation.quote,
                "page": citation.page,
                "section": citation.section,
                "char_start": citation.char_start,
                "char_end": citation.char_end,
                "chunk": citation.chunk,
                "file": found.name if found else None,
            }
        )
    return fields


def url_annotations(run: Run, files: tuple[DocumentFile, ...]) -> list[dict[str, Any]]:
    """``url_citation`` annotations over the answer, one per distinct place cited (two quotes
    on one PDF page are one annotation)."""
    if not run.answer:
        return []
    seen: set[str] = set()
    found = []
    for citation in run.citations:
        url, title = _target(citation, file_at(files, citation.char_start))
        if url in seen:
            continue
        seen.add(url)
        place = {"url": url, "title": title, "start_index": 0, "end_index": len(run.answer)}
        found.append({"type": "url_citation", "url_citation": place})
    return found


def _target(citation: Citation, file: DocumentFile | None) -> tuple[str, str]:
    """The URL and the title (e.g. "report.pdf, p. 2") of where ``citation`` lies."""
    name = file.name if file else UNNAMED
    base = f"file:{urllib.parse.quote(name)}"
    where = [name]
    if citation.page is not None:
        where.append(f"p. {citation.page}")
    if citation.section:
        where.append(citation.section)
    if citation.page is not None:
        return f"{base}#page={citation.page}", ", ".join(where)
    shift = file.start if file else 0
    start, end = citation.char_start - shift, citation.char_end - shift
    if citation.section is None:
        where.append(f"characters {start}-{end}")
    return f"{base}#char={start},{end}", ", ".join(where)
