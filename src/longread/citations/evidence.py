"""The answer's evidence: the spans of the document that hold it.

For a memory agent the evidence is the notes of the final memory that hold the answer, traced
back to where they were read (``Provenance``). A span is kept only if the answer is in it, or
in the sentence of the same chunk nearest to it: a note the model garbled (a wrong digit) may
still align with its needle, and citing a needle that says something else would mislead.
Yes/no answers are not in any text; their evidence is the notes about the question's terms.

Where the notes hold no traceable answer, the document itself is searched for the answer, in
sentences that share words with the question (rag: only the retrieved chunks; full: only the
text the model saw). An answer found nowhere is ``unsupported``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..text.chunking import Chunk
from .align import align, fold, note_key, split_notes, widen_to_sentences
from .align import words as _words
from .model import Citation, SourceSpan
from .provenance import Provenance

MAX_CITATIONS = 3
YES_NO = frozenset({"yes", "no"})
# Words that say nothing about what a question is about.
_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        """a an and are as at be by did do does for from had has have how in is it its of on or
        that the their this to was were what when where which who whom whose why with
        mentioned provided text document according""",
    )
)
# A long answer (an unboxed reply) is cited sentence by sentence, up to this many.
MAX_STATEMENT_NOTES = 6
# A sentence-long answer is looked for by the words it adds to the question, up to this many.
MAX_NEW_WORDS = 4
_WORD = re.compile(r"\w+")


@dataclass
class Evidence:
    """The citations of one answer; ``supported`` is False when the answer was looked for and
    nothing in the document holds it, None when there was no answer to look for."""

    citations: list[Citation] = field(default_factory=list)
    supported: bool | None = None


def memory_evidence(
    answer: str, question: str, memory: str, provenance: Provenance, chunks: Sequence[Chunk]
) -> Evidence:
    """The evidence of a memory agent's ``answer``, read from the final ``memory``."""
    answer = answer.strip()
    if not note_key(answer):
        return Evidence()
    notes = split_notes(memory)
    if note_key(answer) in YES_NO:
        spans = [provenance.span_of(note) for note in notes_about(question, notes)]
        return _evidence([_cited(span) for span in spans if span is not None])
    citations: list[Citation] = []
    for note in filter(lambda note: _holds(note, answer), notes):
        span = provenance.span_of(note)
        citation = None if span is None else _anchored(span, answer, chunks)
        if citation is not None:
            citations.append(citation)
    citations = citations or search_answer(answer, question, chunks)
    citations = citations or search_new_words(answer, question, chunks)
    if not citations:  # a whole sentence or more: each of its sentences traced as a note
        spans = [provenance.span_of(note) for note in split_notes(answer)[:MAX_STATEMENT_NOTES]]
        citations = [_cited(span) for span in spans if span is not None]
    return _evidence(citations)


def search_answer(
    answer: str,
    question: str,
    chunks: Sequence[Chunk],
    *,
    only: Iterable[int] | None = None,
    seen: str | None = None,
) -> list[Citation]:
    """The sentences of the document that hold ``answer`` and share the most words with
    ``question`` (at least one): chunks ``only`` (default: all), sentences inside ``seen``
    (the text the model read) when given. Yes/no answers are in no sentence: none."""
    if note_key(answer) in YES_NO or not note_key(answer):
        return []
    terms = question_terms(question)
    found: list[tuple[int, Citation]] = []
    for index in range(len(chunks)) if only is None else only:
        chunk = chunks[index]
        for at in _occurrences(answer, chunk.text):
            start, end = widen_to_sentences(chunk.text, at, at + len(answer))
            citation = _citation(chunk, start, end)
            overlap = len(terms & _words(citation.quote))
            if overlap and (seen is None or citation.quote in seen):
                found.append((overlap, citation))
    found.sort(key=lambda item: -item[0])  # stable: document order among equals
    return [citation for _, citation in found]


def search_new_words(
    answer: str,
    question: str,
    chunks: Sequence[Chunk],
    *,
    only: Iterable[int] | None = None,
    seen: str | None = None,
) -> list[Citation]:
    """``search_answer`` for what a sentence-long answer adds to its question: "The magic
    number for X mentioned in the text is 4331324." adds "4331324". The sentences that hold
    every added word (at most ``MAX_NEW_WORDS``: a longer answer says too much to find as a
    whole) and share a word with the question."""
    asked = _words(question)
    added = [w for w in dict.fromkeys(_WORD.findall(fold(answer))) if w not in asked]
    added = [w for w in added if w not in _STOPWORDS]
    if not added or len(added) > MAX_NEW_WORDS:
        return []
    rarest = max(added, key=len)  # the longest word: the fewest places to look at
    found = search_answer(rarest, question, chunks, only=only, seen=seen)
    return [c for c in found if set(added) <= _words(c.quote)]


def chunk_evidence(
    answer: str,
    question: str,
    chunks: Sequence[Chunk],
    *,
    only: Iterable[int] | None = None,
    seen: str | None = None,
) -> Evidence:
    """The evidence of a baseline's ``answer``: the document searched (``search_answer``).
    A yes/no answer cannot be found in text: no citation, and not flagged either."""
    if not note_key(answer.strip()):
        return Evidence()
    if note_key(answer) in YES_NO:
        return Evidence([], None)
    answer = answer.strip()
    candidates = list(range(len(chunks)) if only is None else only)
    citations = search_answer(answer, question, chunks, only=candidates, seen=seen)
    citations = citations or search_new_words(answer, question, chunks, only=candidates, seen=seen)
    return _evidence(citations or _aligned_statement(answer, chunks, candidates, seen))


def _aligned_statement(
    answer: str, chunks: Sequence[Chunk], candidates: list[int], seen: str | None
) -> list[Citation]:
    """A long answer's sentences, each aligned with the candidate chunk it matches best
    (as memory notes are: ``align``), within ``seen`` when given."""
    citations = []
    for note in split_notes(answer)[:MAX_STATEMENT_NOTES]:
        matches = [(align(note, chunks[i].text), chunks[i]) for i in candidates]
        scored = [(match, chunk) for match, chunk in matches if match is not None]
        if not scored:
            continue
        match, chunk = max(scored, key=lambda item: item[0].score)
        citation = _citation(chunk, match.start, match.end)
        if seen is None or citation.quote in seen:
            citations.append(citation)
    return citations


def notes_about(question: str, notes: list[str], most: int = 2) -> list[str]:
    """The notes that share the most terms with ``question`` (at least two), best first."""
    terms = question_terms(question)
    scored = [(len(terms & _words(note)), note) for note in notes]
    ranked = sorted((item for item in scored if item[0] >= 2), key=lambda item: -item[0])
    return [note for _, note in ranked[:most]]


def question_terms(question: str) -> set[str]:
    return {w for w in _words(question) if w not in _STOPWORDS and len(w) > 2}


def _holds(note: str, answer: str) -> bool:
    """Whether ``note`` states ``answer`` (its words, in order, ignoring case and marks)."""
    return f" {note_key(answer)} " in f" {note_key(note)} "


def _occurrences(answer: str, text: str) -> list[int]:
    """Where ``answer`` starts in ``text`` as whole words, ignoring case."""
    pattern = re.compile(r"(?<!\w)" + re.escape(fold(answer)) + r"(?!\w)")
    return [match.start() for match in pattern.finditer(fold(text))]


def _anchored(span: SourceSpan, answer: str, chunks: Sequence[Chunk]) -> Citation | None:
    """The citation of a note's span: the span itself when it holds the answer, else the
    sentence of the same chunk nearest to it that does, else None."""
    if _holds(span.quote, answer):
        return _cited(span)
    chunk = chunks[span.chunk]
    places = _occurrences(answer, chunk.text)
    if not places:
        return None
    at = min(places, key=lambda place: abs(place - span.in_chunk))
    start, end = widen_to_sentences(chunk.text, at, at + len(answer))
    return _citation(chunk, start, end, line=span.line)


def _cited(span: SourceSpan) -> Citation:
    return Citation(span.quote, span.char_start, span.char_end, span.chunk, line=span.line)


def _citation(chunk: Chunk, start: int, end: int, line: str | None = None) -> Citation:
    return Citation(
        chunk.text[start:end], chunk.start + start, chunk.start + end, chunk.index, line=line
    )


def _evidence(citations: list[Citation]) -> Evidence:
    """At most ``MAX_CITATIONS`` distinct spans; supported when there is one."""
    unique: dict[tuple[int, int], Citation] = {}
    for citation in citations:
        unique.setdefault((citation.char_start, citation.char_end), citation)
    return Evidence(list(unique.values())[:MAX_CITATIONS], bool(unique))
