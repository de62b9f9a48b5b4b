"""DOCX (Word): the body's paragraphs and tables in order (python-docx).

A paragraph styled "Title" or "Heading N" becomes the section of what follows it. A table
becomes one paragraph, a line per row, its cells joined with " | ".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ._blocks import Block, require

_MAX_SECTION_CHARS = 200


def docx_blocks(path: str | Path, name: str) -> Iterator[Block]:
    """The document's paragraphs and tables as blocks, sectioned by heading styles."""
    docx = require("docx", "DOCX")
    try:
        document = docx.Document(str(path))
    except Exception as error:  # zip, XML and python-docx errors alike mean a damaged file
        raise UsageError(f"{name} is not a readable DOCX ({error})") from None
    section: str | None = None
    for part in document.iter_inner_content():
        if hasattr(part, "rows"):
            yield Block(_table_text(part), section=section)
            continue
        text = part.text.strip()
        if text and _is_heading(part):
            section = " ".join(text.split())[:_MAX_SECTION_CHARS]
        yield Block(text, section=section)


def _is_heading(paragraph: Any) -> bool:
    style = getattr(paragraph.style, "name", None) or ""
    return style == "Title" or style.startswith("Heading")


def _table_text(table: Any) -> str:
    lines = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell comes once per grid column it spans
                continue
            seen.add(id(cell._tc))
            text = " ".join(cell.text.split())
            if text:
                cells.append(text)
        if cells:
            lines.append(" | ".join(cells))
    return "\n".join(lines)
