"""Where each part of a document's text came from: the page of a PDF, the chapter or heading of
an e-book, a web page or a Word file.

A reader turns a file into one text (what the chunker cuts, what character offsets count in)
and, beside it, a ``PositionMap``: a sorted list of anchors, each saying "from this character
on, we are on page P, under heading S". A citation's character span is then located by one
binary search. Anchors come a few per page or heading, so the map stays small whatever the
size of the document: a 1,000-page PDF holds 1,000 anchors.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Position:
    """The page (1-based; None where the format has no pages) and the section (the nearest
    heading or chapter title above; None where there is none) of one character offset."""

    page: int | None = None
    section: str | None = None


class PositionMap:
    """Anchors ``(start, page, section)`` in increasing ``start`` order; ``at(offset)`` is the
    position of the last anchor at or before ``offset``. An empty map locates nothing."""

    def __init__(self) -> None:
        self._starts = array("q")
        self._positions: list[Position] = []

    def add(self, start: int, *, page: int | None = None, section: str | None = None) -> None:
        """From character ``start`` on, the text is on ``page`` under ``section``. Anchors must
        come in order; one at the same offset as the last replaces it, and one that says the
        same as the last is not stored."""
        if self._starts and start < self._starts[-1]:
            raise ValueError(f"anchor at {start} comes before the last one ({self._starts[-1]})")
        position = Position(page, section)
        if self._starts and start == self._starts[-1]:
            self._positions[-1] = position
            return
        if self._positions and self._positions[-1] == position:
            return
        self._starts.append(start)
        self._positions.append(position)

    def at(self, offset: int) -> Position | None:
        """The position of character ``offset``; None before the first anchor."""
        index = bisect_right(self._starts, offset) - 1
        return self._positions[index] if index >= 0 else None

    def extend(self, other: PositionMap, shift: int) -> None:
        """Append ``other``'s anchors moved by ``shift`` characters (documents joined into one
        text: the second starts ``shift`` characters in)."""
        for start, position in zip(other._starts, other._positions, strict=True):
            self.add(start + shift, page=position.page, section=position.section)

    @property
    def has_pages(self) -> bool:
        return any(p.page is not None for p in self._positions)

    def __len__(self) -> int:
        return len(self._starts)

    def __bool__(self) -> bool:
        return bool(self._starts)

    def to_list(self) -> list[dict[str, Any]]:
        """JSON-ready: ``[{start, page, section}, ...]``."""
        return [
            {"start": start, "page": p.page, "section": p.section}
            for start, p in zip(self._starts, self._positions, strict=True)
        ]

    @classmethod
    def from_list(cls, anchors: list[dict[str, Any]]) -> PositionMap:
        positions = cls()
        for anchor in anchors:
            positions.add(anchor["start"], page=anchor.get("page"), section=anchor.get("section"))
        return positions
