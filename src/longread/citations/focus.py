"""Focused rereads: what a section says about the question, when the notes missed it.

A small model that meets a sentence shape it was never trained on copies some other sentence
of the section instead, and on a prose haystack any sentence looks like notes: the shipped
adapter wrote "The binary arithmetic operations have the conventional priority levels." at the
section that held "tired-beacon's shelf number, which nobody else may know, reads 4243307 in
the ledger." (issue 26, the held-out ledger wording: 17 of 20 missed). Shown that sentence
alone, the same adapter copies it. The question picks it, with no call: it is the sentence that
shares the most of the question's terms.

``focus_sentences`` picks such sentences; ``notes_about`` says whether a memory holds notes
about the question at all (the test focused notes clear a memory by), ``restates`` whether one
of them restates the question, and ``lost_notes`` whether an update gave up such notes.

``key_terms`` tells a restatement from a rival: in a document that holds needles for several
keys ("The special magic number for birch is ..." beside dune's), every needle shares the
question's frame ("special magic number"), 3 of its 4 terms, and so passed for restating the
question about dune: rereads showed birch's needle and notes kept it (issue 26, target 6:
every wrong answer of `bench/multi_question.py` was another key's number). The key is the term
the document's best match holds and some rival does not; a sentence or note restates the
question only when it holds the key as well.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .align import split_notes, words
from .evidence import question_terms
from .grounding import unrelated_notes

# A sentence ends at . ! or ? before white space, whatever case follows: a needle that opens
# with its lower-case key ("tired-beacon's shelf number ...") is a sentence of its own.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# Terms a sentence must share with the question before a reread shows it: one shared word
# ("number") picks filler in any technical prose, while a needle shares its key and its
# wording's nouns.
LEAST_SHARED_TERMS = 2
# The share of the question's terms the best sentence must hold as well. A needle restates its
# question: every reread that took one in (issue 26's held-out wordings and RULER's) shared
# 62-100% of the terms. A multi-hop question is long and a paragraph answers one part of it: on
# HotpotQA 8K, 43 of 45 rereads showed sentences sharing 22-57%, mostly of distractors, and
# the notes they left lost 3 questions (stop 53; recipes/smollm2/reread_shares.py). 0 is stop
# 53's rule, the two terms alone.
LEAST_SHARE = 0.6


def least_terms(terms: set[str], share: float, least: int = LEAST_SHARED_TERMS) -> int:
    """How many of the question's ``terms`` a sentence or note must hold: ``share`` of them,
    and at least ``least``."""
    return max(least, math.ceil(share * len(terms)))


def focus_sentences(
    text: str,
    question: str,
    least: int = LEAST_SHARED_TERMS,
    least_share: float = LEAST_SHARE,
    key: frozenset[str] = frozenset(),
) -> list[str]:
    """The sentences of ``text`` that share the most of ``question``'s terms, at least
    ``least`` of them and at least ``least_share`` of the terms, in the order they come; none
    when no sentence shares that many. A sentence without every ``key`` term (``key_terms``)
    is about something else and never shown."""
    terms = question_terms(question)
    least = least_terms(terms, least_share, least)
    scored = [
        (len(terms & held), sentence.strip())
        for sentence in _SENTENCE_END.split(text)
        if sentence.strip() and key <= (held := words(sentence))
    ]
    best = max((shared for shared, _ in scored), default=0)
    if best < least:
        return []
    return [sentence for shared, sentence in scored if shared == best]


def key_terms(
    texts: Iterable[str], question: str, least_share: float = LEAST_SHARE
) -> frozenset[str]:
    """The terms of ``question`` that the best-matching sentences of ``texts`` (a document's
    sections) all hold and some rival lacks: a rival is another sentence holding
    ``least_share`` of the terms (and at least two), e.g. another key's needle. Empty when
    fewer than two sentences hold that many, or when they all hold the same terms: then
    nothing tells the match from the rivals, and ``restates`` reads as it did without keys."""
    terms = question_terms(question)
    least = least_terms(terms, least_share)
    matches = [
        frozenset(held)
        for text in texts
        for sentence in _SENTENCE_END.split(text)
        if len(held := terms & words(sentence)) >= least
    ]
    if len(matches) < 2:
        return frozenset()
    most = max(len(held) for held in matches)
    best = frozenset.intersection(*(held for held in matches if len(held) == most))
    return best - frozenset.intersection(*matches)


# The text a note was traced to (``Provenance.span_of``'s quote), or None.
Cited = Callable[[str], str | None]


@dataclass(frozen=True)
class Restating:
    """What makes a note restate ``question`` (``restates``, ``lost_notes``): it holds at
    least ``least_share`` of the question's terms (and at least two) and every ``key`` term
    (``key_terms``): a copied needle restates its question, another key's needle does not.
    With ``cited``, a note whose cited sentence does counts too: the adapter rewords a needle
    it was shown ("To turn the dial to N, you must turn it to N."), dropping the key, and
    still records it. With ``skip_questions``, a note that is a question (``asks``) never
    counts: the adapter shown a needle sometimes writes the question back, which holds every
    term and no answer."""

    question: str
    least_share: float = LEAST_SHARE
    cited: Cited | None = None
    skip_questions: bool = False
    key: frozenset[str] = frozenset()
    least: int = LEAST_SHARED_TERMS  # the fewest terms, whatever the share (the exit: 1)


def restates(memory: str, rule: Restating) -> bool:
    """Whether a note of ``memory`` restates ``rule.question`` (see ``Restating``)."""
    terms = question_terms(rule.question)
    least = least_terms(terms, rule.least_share, rule.least)

    def holds(note: str) -> bool:
        if rule.skip_questions and asks(note):
            return False
        quote = rule.cited(note) if rule.cited is not None else None
        return any(
            len(terms & (held := words(text))) >= least and rule.key <= held
            for text in (note, quote or "")
        )

    return any(holds(note) for note in split_notes(memory))


def asks(note: str) -> bool:
    """Whether ``note`` is a question (it ends with "?"): it records nothing."""
    return note.rstrip().endswith("?")


def lost_notes(before: str, after: str, rule: Restating) -> bool:
    """Whether the memory ``after`` gave up notes about ``rule.question`` that ``before``
    held: ``before`` restated the question (``restates``) and ``after`` does not. With
    ``rule.least_share`` 0 (stop 53's rule): ``before`` held a note about the question (one
    shared term) and ``after`` none. One term is too weak both ways: filler that shares a
    key's word ("feather" for lively-feather) is then kept against focused notes clearing it
    (RULER's 32K and 64K samples), and prose sharing "number" replaces a noted needle."""
    if rule.least_share <= 0:
        question = rule.question
        return notes_about(before, question) and not notes_about(after, question)
    return restates(before, rule) and not restates(after, rule)


def notes_about(memory: str, question: str) -> bool:
    """Whether ``memory`` holds a note that shares a term with ``question`` (an empty memory,
    or one of copied filler, holds none)."""
    return bool(split_notes(memory)) and not unrelated_notes(memory, question)
