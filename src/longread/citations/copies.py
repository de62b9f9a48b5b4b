"""Exact copies: a value a note nearly copied is replaced by its source's.

A 135M model copies a long value with a few characters dropped or changed: niah_single_3's
UUID "0c564d3c-9194-4e2b-a415-e330da39eecd" written "...-e330da39e.", "...-82b1-263cf084218f"
written "...-82bcf084218f" (stage grpo26b: all four of its misses at 8K). Grounded notes
then cut the note, since its value is not in the section, and the needle is lost. The run's
``Provenance`` already knows which span the note was copied from; a value of the note that is
nearly one of that span's values (``NEAR_COPY``) is taken to be that value, copied wrong, and
the span's is written in its place. No model call.

The final answer gets the same repair against the memory it was read from
(``exact_answer_copy``): grpo26b's last niah_single_3 8K miss with exact copies had the UUID
whole in its memory and dropped its tail in the ``\\boxed{}`` answer.

Only notes about the question are touched (they share one of its terms), only values holding
a digit and of at least ``MIN_VALUE_CHARS`` characters (a UUID, a phone or magic number, not a
year or a count), and only towards a value the note's own source span holds.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from .align import fold, split_notes
from .evidence import question_terms
from .provenance import Provenance

# A value: a run of word characters and hyphens holding a digit (a number, a UUID, a code).
VALUE = re.compile(r"[\w-]*\d[\w-]*")
# How alike (difflib's ratio, 0-1) a written value must be to a source value to be taken for
# a miscopy of it: the miscopies above are 0.93-0.97; "11" against "4076011" is 0.44.
NEAR_COPY = 0.8
# Shorter values are left as written: a year or a count one digit off is another value.
MIN_VALUE_CHARS = 6
_WORD = re.compile(r"\w+")


def exact_copies(
    memory: str, question: str, provenance: Provenance
) -> tuple[str, list[tuple[str, str]]]:
    """``memory`` with every near-copied value in its notes about ``question`` replaced by
    the value of the span the note was copied from, and the (written, source) pairs."""
    terms = question_terms(question)
    repairs: list[tuple[str, str]] = []
    for note in split_notes(memory):
        if not terms & set(_WORD.findall(fold(note))):
            continue
        span = provenance.span_of(note)
        if span is None:
            continue
        fixes = near_copies(note, VALUE.findall(span.quote))
        if fixes:
            memory = memory.replace(note, as_sources(note, fixes), 1)
            repairs += fixes
    return memory, repairs


def exact_answer_copy(answer: str, memory: str) -> tuple[str, list[tuple[str, str]]]:
    """``answer`` with every value it nearly copied from ``memory`` written as the memory
    has it, and the (written, source) pairs."""
    fixes = near_copies(answer, VALUE.findall(memory))
    return as_sources(answer, fixes), fixes


def as_sources(text: str, fixes: list[tuple[str, str]]) -> str:
    """``text`` with each written value of ``fixes`` replaced by its source value."""
    for written, source in fixes:
        text = text.replace(written, source)
    return text


def near_copies(note: str, sources: list[str]) -> list[tuple[str, str]]:
    """The values of ``note`` that nearly copy one of ``sources`` (and are none of them),
    each with the source value it copies."""
    found = []
    for value in dict.fromkeys(VALUE.findall(note)):
        if value in sources or len(value) < MIN_VALUE_CHARS:
            continue
        best = max(sources, key=lambda s: SequenceMatcher(None, value, s).ratio(), default=None)
        if best is not None and SequenceMatcher(None, value, best).ratio() >= NEAR_COPY:
            found.append((value, best))
    return found
