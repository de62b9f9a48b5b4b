"""The spans of a chunk that its memory update drew on, as pieces of text to lay out: plain
pieces, and marked pieces naming the memory line(s) each backs.

An update step records ``sources``: for each line it wrote, the span of the chunk it was
aligned with (``in_chunk``, the start in the chunk's text, and the span's length). When the
viewer found the chunk by its prompt template (``FoundChunk.exact``) those offsets are used as
they are; a chunk found by the ``Section:`` heuristic may be cut differently, so there the
span's text (``SourceSpan.quote``) is checked at the offset and searched for when it is not
there. The page lays the pieces out as text (autoescaped), never as HTML.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

from ..citations.model import SourceSpan
from .chunks import FoundChunk


@dataclass(frozen=True)
class Piece:
    """A run of the chunk's text; ``lines``: the memory lines it backs (empty: plain text)."""

    text: str
    lines: tuple[str, ...] = ()

    @property
    def marked(self) -> bool:
        return bool(self.lines)

    @property
    def title(self) -> str:
        """The mark's tooltip: which memory line(s) this text backs."""
        return "\n".join(f"backs the memory line: {line}" for line in self.lines)


def highlight(
    chunk: FoundChunk, chunk_index: int | None, sources: Iterable[SourceSpan]
) -> list[Piece]:
    """``chunk``'s text cut into pieces, the ones inside a source span of this chunk
    (``chunk_index``) marked. Spans of other chunks (a line an update kept from an earlier
    note) and spans that cannot be placed are left out."""
    text = chunk.text
    placed: list[tuple[int, int, str]] = []
    for span in sources:
        if span.chunk != chunk_index:
            continue
        where = _place(span, text, chunk.exact)
        if where is not None and where[0] < where[1]:
            placed.append((*where, span.line))
    return _pieces(text, placed)


def _place(span: SourceSpan, text: str, exact: bool) -> tuple[int, int] | None:
    start, end = span.in_chunk, span.in_chunk + span.char_end - span.char_start
    fits = start >= 0 and end <= len(text)
    quote = span.quote
    if exact or not quote:
        return (start, end) if fits else None
    if fits and text[start:end] == quote:
        return start, end
    found = text.find(quote)
    return (found, found + len(quote)) if found >= 0 else None


def _pieces(text: str, spans: list[tuple[int, int, str]]) -> list[Piece]:
    """Cut at every span boundary; each piece carries the lines of the spans covering it (so
    overlapping spans mark their overlap once, naming both lines)."""
    cuts = sorted({0, len(text), *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    pieces: list[Piece] = []
    for start, end in pairwise(cuts):
        lines = tuple(dict.fromkeys(line for s, e, line in spans if s <= start and end <= e))
        if pieces and pieces[-1].lines == lines:
            pieces[-1] = Piece(pieces[-1].text + text[start:end], lines)
        else:
            pieces.append(Piece(text[start:end], lines))
    return pieces
