"""Markdown: the text exactly as written (streamed like any text file); ATX headings
(``# Title`` ... ``###### Title``) set the section, except inside fenced code blocks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from ..positions import PositionMap
from ..reading import Warn, iter_paragraphs, read_document

_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t\r]*$", re.MULTILINE)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)
_MAX_SECTION_CHARS = 200


def markdown_pieces(
    path: str | Path, name: str, warn: Warn, positions: PositionMap
) -> Iterator[str]:
    """The file's paragraphs, anchoring each heading's section in ``positions`` at its line."""
    offset = 0
    fence: str | None = None  # the marker of the open code block, if any
    for paragraph in iter_paragraphs(read_document(path, warn=warn, name=name)):
        for line in _lines(paragraph):
            fence = _fence_after(line.group(), fence)
            heading = _HEADING.match(line.group()) if fence is None else None
            if heading and heading.group(1):
                title = " ".join(heading.group(1).split())[:_MAX_SECTION_CHARS]
                positions.add(offset + line.start(), section=title)
        yield paragraph
        offset += len(paragraph)


def _lines(text: str) -> Iterator[re.Match[str]]:
    return re.finditer(r"^.*$", text, re.MULTILINE)


def _fence_after(line: str, fence: str | None) -> str | None:
    """The open fence after ``line``: a fence opens one, the same marker (or longer) closes it."""
    match = _FENCE.match(line)
    if match is None:
        return fence
    marker = match.group(1)
    if fence is None:
        return marker
    return None if marker[0] == fence[0] and len(marker) >= len(fence) else fence
