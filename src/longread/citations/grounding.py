"""Whether a memory's answer was read, not made up: the grounded exit (issue 29).

An exit gate or probe judges the notes alone, so it cannot tell a copied answer from one the
model wrote itself: the 135M exit probe said yes to made-up notes ("Penelope Lively was born in
San Ramon Valley ...") before any evidence was read, and a probe taught more "yes" wordings
said yes to every made-up answer (stage sft29r). The sections read can tell them apart, with
no call: the run's ``Provenance`` already traces each note to where it was read.

The notes that speak to the question (they share one of its terms) must all be traced to a
section read, and every specific word of each (a number, a capitalised word) must be in the
text it was traced to: a note that names the question's key but a value the section does not
hold ("... is: 100" aligned with "... is: 4076011") is not grounded. Notes about nothing the
question asks (copied filler) neither ground nor block an exit; with no note about the
question there is nothing to answer from, and the exit is refused. Given the question's key
(``focus.key_terms``: what sets its needle apart from other keys' needles), a note naming the
key must be traced to text that names it too: the shipped adapter wrote "The special magic
number for dune mentioned in the document is 8056020." at birch's needle, birch's number, and
every word of it but the key was in the section. An exit given the key needs every note
about the question to name it: a note that is another key's needle, copied, answers another
question, and beside the asked one it leaves the answer to chance.

The same tests serve two memory options: grounded notes cut the notes about the question that
no section read holds, and focused notes clear a memory whose notes are all about nothing the
question asks.
"""

from __future__ import annotations

import re

from .align import fold, specific_words, split_notes
from .align import words as _words
from .evidence import question_terms
from .provenance import Provenance

_MARKER_ONLY = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*$")  # a list marker whose note was cut


def ungrounded_notes(
    memory: str, question: str, provenance: Provenance, key: frozenset[str] = frozenset()
) -> list[str] | None:
    """The notes of ``memory`` about ``question`` that the sections read do not hold: empty
    when every such note is traced (the exit may be honoured), None when no note is about
    the question at all. A note naming a ``key`` term is held only by text naming it too."""
    terms = question_terms(question)
    about = [note for note in split_notes(memory) if terms & _words(note)]
    if not about:
        return None
    return [note for note in about if not _traced(note, provenance, key)]


def without_ungrounded(
    memory: str, question: str, provenance: Provenance, key: frozenset[str] = frozenset()
) -> tuple[str, list[str]]:
    """``memory`` with its ungrounded notes about ``question`` (``ungrounded_notes``, with
    ``key``) cut out, and those notes: a made-up answer written before the evidence ("The
    special magic number ... is no previous memory.") is what a small model otherwise keeps
    to the end."""
    dropped = ungrounded_notes(memory, question, provenance, key) or []
    if not dropped:
        return memory, []
    for note in dropped:
        at = memory.find(note)
        if at >= 0:
            memory = memory[:at] + memory[at + len(note) :]
    lines = (_MARKER_ONLY.sub("", line).strip() for line in memory.splitlines())
    return "\n".join(" ".join(line.split()) for line in lines if line), dropped


def unrelated_notes(memory: str, question: str) -> bool:
    """Whether ``memory`` holds notes and none of them is about ``question`` (none shares one
    of its terms): copied filler. A small model keeps such notes to the end and the evidence
    does not get in when it comes (stage 1e's misses at 32K; sft29q's on held-out wordings)."""
    notes = split_notes(memory)
    terms = question_terms(question)
    return bool(notes) and not any(terms & _words(note) for note in notes)


def exit_grounded(
    memory: str, question: str, provenance: Provenance, key: frozenset[str] = frozenset()
) -> bool:
    """Whether an exit on ``memory`` rests on what was read (``ungrounded_notes``, with
    ``key``), and, given the question's key, whether every note about the question names it.
    A note of another key's needle is traced and shares the question's frame: without the
    key the exit probe stopped RULER's niah_multikey_2 at the first rival needle (17 of 20
    documents at 8K, stop 70); with one note naming the key beside a rival's, the answer
    took the rival's number where reading on would have dropped it. With no key (a document
    without rivals) only the tracing counts."""
    if ungrounded_notes(memory, question, provenance, key) != []:
        return False
    terms = question_terms(question)
    about = [note for note in split_notes(memory) if terms & _words(note)]
    return all(key <= _words(note) for note in about)


def _traced(note: str, provenance: Provenance, key: frozenset[str] = frozenset()) -> bool:
    """Whether ``note`` has a source span whose text holds each of its specific words, and
    each ``key`` term the note names."""
    span = provenance.span_of(note)
    if span is None:
        return False
    quoted = _words(span.quote)
    named = key & _words(note)
    return named <= quoted and all(fold(word) in quoted for word in specific_words(note))
