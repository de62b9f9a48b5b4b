"""Put citations on the page: the page and section of each span, and the line ``ask`` prints."""

from __future__ import annotations

from dataclasses import replace

from ..text.positions import PositionMap
from .model import Citation

UNSUPPORTED = "Sources: none found in the document (unsupported answer)"


def locate(citations: list[Citation], positions: PositionMap | None) -> list[Citation]:
    """``citations`` with ``page`` and ``section`` read from ``positions`` at each span's
    start (unchanged where the map has nothing there)."""
    if not positions:
        return list(citations)
    located = []
    for citation in citations:
        position = positions.at(citation.char_start)
        if position is None:
            located.append(citation)
            continue
        located.append(replace(citation, page=position.page, section=position.section))
    return located


def place(citation: Citation) -> str:
    """Where a citation is, for people: "p. 12", else the section, else its characters."""
    if citation.page is not None:
        return f"p. {citation.page}"
    if citation.section:
        return f"\u00a7 {citation.section}"
    return f"chars {citation.char_start}-{citation.char_end}"


def sources_line(citations: list[Citation], supported: bool | None) -> str | None:
    """The line printed under an answer: "Sources: p. 12, p. 47"; the unsupported warning
    when nothing backs the answer; None when the answer was not checked (no answer)."""
    if supported is False:
        return UNSUPPORTED
    if not citations:
        return None
    places: list[str] = []
    for citation in citations:
        if (where := place(citation)) not in places:
            places.append(where)
    return "Sources: " + ", ".join(places)
