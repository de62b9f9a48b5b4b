"""Where each note of a run's memories came from, kept as the memory is rewritten.

After every update the notes it added are aligned with the chunk it read (``align``). A note
the model carried over word for word keeps the span it had; one it reworded from an earlier
note inherits that note's span; a note that matches neither the chunk nor any earlier note
has no source (the model made it up, or summarised beyond recognition). A note that pads a
copy with the question's phrasing is aligned a second time without those words
(``without_echo``). Integration calls (MemReread) read no chunk: their notes can only inherit.

The map holds the notes of recent memories only (``limit``), so a run over a very long
document costs bounded memory.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from rapidfuzz import fuzz, process

from ..text.chunking import Chunk
from .align import MIN_ALIGN_SCORE, align, note_key, shown_match, split_notes, without_echo
from .model import SourceSpan

# A rewritten note inherits an earlier note's span from this similarity (0-100) up, unless the
# chunk just read matches it at least as well.
MIN_INHERIT_SCORE = 85.0
NOTES_KEPT = 4096


class Provenance:
    """The source span of every note seen in one run's memories."""

    def __init__(self, limit: int = NOTES_KEPT) -> None:
        self.limit = limit
        self._spans: OrderedDict[str, SourceSpan] = OrderedDict()

    def on_update(
        self,
        old_memory: str,
        new_memory: str,
        chunk: Chunk,
        question: str = "",
        shown: Sequence[str] = (),
    ) -> list[SourceSpan]:
        """Record the notes ``new_memory`` added to ``old_memory`` after reading ``chunk``
        for ``question`` (whose phrasing a note may repeat); their spans, for the step
        record. ``shown``: the chunk's sentences the update was shown in place of the whole
        (a focused reread); a note that aligns nowhere but claims only what one of them says
        is traced to it (``align.shown_match``)."""
        return self._record(old_memory, new_memory, chunk, question, shown)

    def on_integrate(self, old_memory: str, new_memory: str) -> list[SourceSpan]:
        """As ``on_update`` for a rewrite that read no chunk (notes can only inherit)."""
        return self._record(old_memory, new_memory, None)

    def span_of(self, note: str) -> SourceSpan | None:
        """The span ``note`` came from: its own, or the closest earlier note's."""
        key = note_key(note)
        span = self._spans.get(key)
        if span is not None:
            self._spans.move_to_end(key)
            return span
        return self._inherit(note, key)

    def _record(
        self,
        old_memory: str,
        new_memory: str,
        chunk: Chunk | None,
        question: str = "",
        shown: Sequence[str] = (),
    ) -> list[SourceSpan]:
        kept = {note_key(note) for note in split_notes(old_memory)}
        added: list[SourceSpan] = []
        for note in split_notes(new_memory):
            key = note_key(note)
            if key in kept or key in self._spans:
                if key in self._spans:
                    self._spans.move_to_end(key)
                continue
            span = self._source(note, key, chunk, question, shown)
            if span is not None:
                self._remember(key, span)
                added.append(span)
        return added

    def _source(
        self,
        note: str,
        key: str,
        chunk: Chunk | None,
        question: str = "",
        shown: Sequence[str] = (),
    ) -> SourceSpan | None:
        """The chunk's span for ``note``, unless an earlier note is closer to it: then the
        note was carried over, reworded (a heading "part 7" read in this chunk is closer to it
        than an earlier "part 1" is)."""
        inherited = self._inherit(note, key)
        match = None if chunk is None else align(note, chunk.text, MIN_ALIGN_SCORE)
        if match is None and chunk is not None and question:
            trimmed = without_echo(note, question, chunk.text)
            match = None if trimmed == note else align(trimmed, chunk.text, MIN_ALIGN_SCORE)
        if match is None and chunk is not None and shown:
            match = shown_match(note, chunk.text, shown)
        if match is not None and (inherited is None or match.score >= inherited.score):
            assert chunk is not None
            return SourceSpan(
                line=note,
                char_start=chunk.start + match.start,
                char_end=chunk.start + match.end,
                chunk=chunk.index,
                in_chunk=match.start,
                score=round(match.score, 1),
                quote=chunk.text[match.start : match.end],
            )
        return inherited

    def _inherit(self, note: str, key: str) -> SourceSpan | None:
        if not self._spans:
            return None
        found = process.extractOne(
            key, list(self._spans), scorer=fuzz.ratio, score_cutoff=MIN_INHERIT_SCORE
        )
        if found is None:
            return None
        earlier = self._spans[found[0]]
        return SourceSpan(
            line=note,
            char_start=earlier.char_start,
            char_end=earlier.char_end,
            chunk=earlier.chunk,
            in_chunk=earlier.in_chunk,
            score=round(found[1], 1),
            quote=earlier.quote,
            inherited=True,
        )

    def _remember(self, key: str, span: SourceSpan) -> None:
        self._spans[key] = span
        while len(self._spans) > self.limit:
            self._spans.popitem(last=False)
