"""Align a note of the memory with the text it was written from.

A memory agent copies, shortens or rewords what it keeps; the words it keeps are still mostly
the source's. So the best fuzzy match of a note inside a chunk (rapidfuzz's partial ratio:
the window of the chunk most like the note) finds where the note came from, without asking the
model anything. The match is widened to whole sentences, which is what a reader wants to see.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

# A note aligned below this score (0-100) is not cited: at 80, "One of the special magic
# numbers for X is: 123" still finds its needle when reworded ("The magic number for X is
# 123"), while a made-up sentence matches ordinary prose at 50-70.
MIN_ALIGN_SCORE = 80.0
# Notes shorter than this (characters) are too short to place: they match anywhere.
MIN_NOTE_CHARS = 12
# How far a span is widened to reach a sentence boundary, in characters each way.
MAX_WIDEN = 300

_LINE_MARKER = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_WORD = re.compile(r"\w+")
_SENTENCE_STOP = re.compile(r"[.!?](?=\s|$)|\n")
_SPECIFIC = re.compile(r"\w*\d\w*|[A-Z]\w*")  # numbers and names: what a note claims


@dataclass(frozen=True)
class Match:
    """Where a note matched a text: ``start``..``end`` in the text, with a 0-100 ``score``."""

    start: int
    end: int
    score: float


def fold(text: str) -> str:
    """Lower case, character for character, so that offsets in the folded text are offsets
    in the original (``str.lower`` can change a string's length: "İ" becomes two)."""
    return "".join(low if len(low := char.lower()) == 1 else char for char in text)


def words(text: str) -> set[str]:
    """The words of ``text``, folded: what the question-term tests compare."""
    return set(_WORD.findall(fold(text)))


def split_notes(memory: str) -> list[str]:
    """The memory's notes: its lines, each cut into sentences, without list markers; notes too
    short to place anywhere are left out."""
    notes: list[str] = []
    for line in memory.splitlines():
        line = _LINE_MARKER.sub("", line).strip()
        for sentence in _SENTENCE_END.split(line):
            sentence = sentence.strip()
            if len(sentence) >= MIN_NOTE_CHARS and len(_WORD.findall(sentence)) >= 2:
                notes.append(sentence)
    return notes


def note_key(note: str) -> str:
    """What two notes that say the same thing have in common: their words, folded."""
    return " ".join(_WORD.findall(fold(note)))


def align(note: str, text: str, min_score: float = MIN_ALIGN_SCORE) -> Match | None:
    """The sentence(s) of ``text`` that ``note`` was most likely written from, or None when
    nothing in ``text`` is close enough (``min_score``)."""
    if len(note) < MIN_NOTE_CHARS or not text:
        return None
    found = fuzz.partial_ratio_alignment(fold(note), fold(text), score_cutoff=min_score)
    if found is None:
        return None
    start, end = widen_to_sentences(text, found.dest_start, found.dest_end)
    return Match(start, end, found.score)


def shown_match(note: str, text: str, shown: Sequence[str]) -> Match | None:
    """The first of the ``shown`` sentences of ``text`` that holds every specific word of
    ``note`` (``specific_words``; a note with none matches nothing), scored as ``align``
    scores: where a reread showed the model a few sentences, a note that rewords one but
    claims only what it says was written from it ("To turn the dial to 4331324, you must turn
    it to 4331324." from "Whoever wants to open lonely-flame's locker must turn the dial to
    4331324.", which ``align`` scores below ``MIN_ALIGN_SCORE``)."""
    claimed = [fold(word) for word in specific_words(note)]
    if not claimed or len(note) < MIN_NOTE_CHARS:
        return None
    folded = fold(text)
    for sentence in shown:
        at = folded.find(fold(sentence))
        if at >= 0 and all(word in words(sentence) for word in claimed):
            score = fuzz.partial_ratio(fold(note), fold(sentence))
            return Match(at, at + len(sentence), score)
    return None


def specific_words(note: str) -> list[str]:
    """The numbers and capitalised words of ``note``; its first word only if it holds a
    digit (a sentence's first word is capitalised anyway)."""
    found = list(_SPECIFIC.finditer(note))
    opens = bool(found) and found[0].start() == len(note) - len(note.lstrip())
    if opens and not any(char.isdigit() for char in found[0].group()):
        found = found[1:]
    return [match.group() for match in found]


def without_echo(note: str, echo: str, text: str) -> str:
    """``note`` without the words it repeats from ``echo`` (the question) that ``text`` (the
    section read) does not hold: a small model pads what it copies with the question's
    phrasing ("... for old-pond mentioned in the provided text is: 9605461."), which can pull
    an exact copy below ``MIN_ALIGN_SCORE``. The note itself is unchanged when no word
    goes, or when more than a third of its words would (then it is the question restated,
    not a copy)."""
    asked = set(_WORD.findall(fold(echo))) - set(_WORD.findall(fold(text)))
    words = list(_WORD.finditer(note))
    dropped = [word for word in words if fold(word.group()) in asked]
    if not dropped or 3 * len(dropped) > len(words):
        return note
    for word in reversed(dropped):
        note = note[: word.start()] + note[word.end() :]
    return " ".join(note.split())


def widen_to_sentences(text: str, start: int, end: int) -> tuple[int, int]:
    """``start``..``end`` widened to the sentence(s) around it (at most ``MAX_WIDEN``
    characters each way), trimmed of surrounding whitespace."""
    low = max(0, start - MAX_WIDEN)
    before = text[low:start]
    cut = max(before.rfind(". "), before.rfind("! "), before.rfind("? "), before.rfind("\n"))
    if cut >= 0:
        start = low + cut + 1
    elif low == 0:
        start = 0
    # From the span's last character: a span that already ends a sentence stays as it is.
    origin = max(start, end - 1)
    stop = _SENTENCE_STOP.search(text[origin : end + MAX_WIDEN])
    if stop is not None:
        end = max(end, origin + (stop.start() if stop.group() == "\n" else stop.end()))
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def find_all(needle: str, text: str) -> list[int]:
    """Every start of ``needle`` in ``text``, ignoring case (folded, so offsets hold)."""
    needle, text = fold(needle), fold(text)
    found, at = [], text.find(needle)
    while needle and at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found
