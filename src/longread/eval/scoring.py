"""One judge for every method (ALGORITHMS.md section 5): answer extraction, strict, lenient and
RULER metrics, and the word recall that ReMemR1's step rewards are built on.

Metric functions take a prediction and a list of gold aliases and return the best match over the
aliases. :func:`score_answer` turns an agent's final reply into a :class:`Score`; a failed or empty
reply is a "null" that scores zero everywhere and stays in the denominator.

RULER samples are the exception: their golds are needles that are ALL required, not aliases, so
:func:`score_ruler` judges samples with several needles by the ``*_needles`` metrics, and reads
RULER's string_match_all/part off the whole reply as RULER does.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ..agents.answer import extract_all_boxed, extract_boxed, strip_think

# ``[^\w\s]`` is every ASCII punctuation mark SQuAD strips plus the Unicode ones (curly quotes,
# dashes) that models often emit; ``_`` counts as \w, but SQuAD strips it, so it is listed too.
_PUNCTUATION = re.compile(r"[^\w\s]|_")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# Innermost LaTeX text wrappers; unwrapped repeatedly so nested ones peel off from the inside.
_LATEX_TEXT = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox)\{([^{}]*)\}")
# HotpotQA's rule: these answers are class labels, so partial credit makes no sense.
_CLOSED_ANSWERS = frozenset({"yes", "no", "noanswer"})
# How a model lists several values in one answer: "a, b; c" or one per line.
_LIST_SEPARATORS = re.compile(r"[,;\n]")
# The "and" of a list's last item ("a, b, and c"), which is not part of the value.
_LIST_AND = re.compile(r"^and\s+", re.IGNORECASE)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, strip punctuation, drop a/an/the, collapse whitespace.

    Punctuation is deleted, not replaced by a space, so "U.S.A." and "USA" both become "usa".
    """
    text = _PUNCTUATION.sub("", text.lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


def _usable(golds: Sequence[str]) -> list[str]:
    """Normalised gold aliases, without those that normalise to nothing (they would match all)."""
    return [g for g in map(normalize_answer, golds) if g]


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals a normalised gold alias, else 0.0."""
    pred = normalize_answer(prediction)
    return float(bool(pred) and pred in _usable(golds))


def _token_f1(pred: str, gold: str) -> float:
    """Token F1 of two normalised strings; yes/no/noanswer on either side must match exactly."""
    if (pred in _CLOSED_ANSWERS or gold in _CLOSED_ANSWERS) and pred != gold:
        return 0.0
    common = sum((Counter(pred.split()) & Counter(gold.split())).values())
    if common == 0:
        return 0.0
    precision = common / len(pred.split())
    recall = common / len(gold.split())
    return 2 * precision * recall / (precision + recall)


def f1(prediction: str, golds: Sequence[str]) -> float:
    """Best token F1 of the prediction against any gold alias."""
    pred = normalize_answer(prediction)
    return max((_token_f1(pred, gold) for gold in _usable(golds)), default=0.0)


def sub_em(prediction: str, golds: Sequence[str], *, whole_words: bool = False) -> float:
    """1.0 if a normalised gold alias occurs in the normalised prediction.

    The default is the papers' plain substring test, so their numbers can be reproduced; it
    finds "no" in "i dont know". ``whole_words=True`` checks word boundaries instead (stricter,
    an option). An empty prediction never matches.
    """
    pred = normalize_answer(prediction)
    if not pred:
        return 0.0
    if whole_words:
        return float(any(f" {gold} " in f" {pred} " for gold in _usable(golds)))
    return float(any(gold in pred for gold in _usable(golds)))


def _squash(text: str) -> str:
    return "".join(text.lower().split())


def strict_match(prediction: str, golds: Sequence[str]) -> float:
    """The training reward: 1.0 if the prediction, lower-cased and without any whitespace,
    equals a gold alias treated the same way; punctuation still counts."""
    pred = _squash(prediction)
    return float(bool(pred) and any(pred == _squash(g) for g in golds if _squash(g)))


def _found(prediction: str, golds: Sequence[str]) -> list[bool]:
    """For each non-blank gold string: does it occur in the prediction (case-insensitive)?"""
    pred = prediction.lower()
    return [g.strip().lower() in pred for g in golds if g.strip()]


def string_match_all(prediction: str, golds: Sequence[str]) -> float:
    """RULER: share of the gold strings found in the prediction, x 100."""
    found = _found(prediction, golds)
    return 100.0 * sum(found) / len(found) if found else 0.0


def string_match_part(prediction: str, golds: Sequence[str]) -> float:
    """RULER: 100.0 if any gold string is found in the prediction, else 0.0."""
    return 100.0 * any(_found(prediction, golds))


def _answer_parts(answers: Sequence[str]) -> list[str]:
    """The values listed in some answers: each split at commas, semicolons and line breaks,
    stripped, a leading "and" dropped, blanks left out."""
    parts = (part.strip() for answer in answers for part in _LIST_SEPARATORS.split(answer))
    return [value for value in (_LIST_AND.sub("", part) for part in parts) if value]


def exact_match_needles(answers: Sequence[str], golds: Sequence[str]) -> float:
    """All needles required: 1.0 if the set of normalised values listed in ``answers`` (see
    :func:`_answer_parts`) equals the set of normalised golds; order and repeats do not count,
    a missing or an extra value does. 0.0 when either set is empty."""
    values = {v for v in map(normalize_answer, _answer_parts(answers)) if v}
    needles = set(_usable(golds))
    return float(bool(values) and values == needles)


def f1_needles(answers: Sequence[str], golds: Sequence[str]) -> float:
    """All needles required: token F1 of the answers, joined, against all the golds joined, so
    one needle of four has recall 1/4 instead of the full marks its best alias would give."""
    needles = list(dict.fromkeys(_usable(golds)))
    if not needles:
        return 0.0
    return _token_f1(normalize_answer("\n".join(answers)), " ".join(needles))


def sub_em_needles(answers: Sequence[str], golds: Sequence[str]) -> float:
    """All needles required: 1.0 if every normalised gold occurs in the normalised answers
    (joined by line breaks, so no value is glued to the next); 0.0 without a usable gold."""
    text = normalize_answer("\n".join(answers))
    needles = _usable(golds)
    return float(bool(text) and bool(needles) and all(g in text for g in needles))


def strict_match_needles(answers: Sequence[str], golds: Sequence[str]) -> float:
    """All needles required, the training reward's way: 1.0 if the set of values listed in
    ``answers``, lower-cased and without whitespace, equals the golds' set treated the same way
    (punctuation still counts); order and repeats do not."""
    values = {v for v in map(_squash, _answer_parts(answers)) if v}
    needles = {g for g in map(_squash, golds) if g}
    return float(bool(values) and values == needles)


def word_recall(text: str, golds: Sequence[str]) -> float:
    """Share of a gold alias's distinct normalised words present among the text's normalised
    words, best alias; 0.0 when no alias has a word. Used for ReMemR1's update/revisit gains."""
    words = set(normalize_answer(text).split())
    recalls = (
        sum(w in words for w in gold_words) / len(gold_words)
        for gold_words in (set(g.split()) for g in _usable(golds))
    )
    return max(recalls, default=0.0)


@dataclass
class Score:
    """How one final reply scored against a sample's gold answers.

    ``prediction`` is the extracted answer: the content of the last ``\\boxed{}`` or, when
    ``boxed`` is False, the whole final text (which only the lenient metrics credit); None when
    ``null``. It is what the QA metrics judge, except for RULER samples with several needles,
    which are judged on all the boxes (see :func:`score_ruler`). ``null`` marks an empty or
    failed output, scored 0 everywhere and still counted. ``em``, ``f1``, ``sub_em`` and
    ``strict`` lie in 0..1; ``match_all`` and ``match_part`` (0..100) are set for RULER tasks
    only and read the whole final text.
    """

    prediction: str | None
    boxed: bool
    null: bool
    em: float = 0.0
    f1: float = 0.0
    sub_em: float = 0.0
    strict: float = 0.0
    match_all: float | None = None
    match_part: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def strip_latex_text(answer: str) -> str:
    """``\\text{Paris}`` -> ``Paris``: models often wrap boxed words in LaTeX text commands,
    which would otherwise cost them the strict reward and survive normalisation as "textparis"."""
    while True:
        unwrapped = _LATEX_TEXT.sub(r"\1", answer)
        if unwrapped == answer:
            return answer.strip()
        answer = unwrapped


def extract_prediction(final_reply: str | None) -> tuple[str | None, bool]:
    """``(prediction, boxed)`` from a final reply; the prediction is None for an empty output."""
    text = strip_think(final_reply or "")
    boxed = extract_boxed(text)
    prediction = text if boxed is None else strip_latex_text(boxed)
    return prediction or None, boxed is not None


def score_qa(final_reply: str | None, golds: Sequence[str]) -> Score:
    """Strict and lenient QA metrics of a final reply (strict needs a box)."""
    prediction, boxed = extract_prediction(final_reply)
    if prediction is None:
        return Score(prediction=None, boxed=boxed, null=True)
    return Score(
        prediction=prediction,
        boxed=boxed,
        null=False,
        em=exact_match(prediction, golds),
        f1=f1(prediction, golds),
        sub_em=sub_em(prediction, golds),
        strict=strict_match(prediction, golds) if boxed else 0.0,
    )


def _judge_all_needles(score: Score, text: str, golds: Sequence[str]) -> None:
    """Replace the QA metrics of ``score`` by the all-needles ones, judged on every box of
    ``text`` (LaTeX text wrappers peeled), or on the whole text when it has no box."""
    boxes = [strip_latex_text(box) for box in extract_all_boxed(text)]
    answers = boxes or [text]
    score.em = exact_match_needles(answers, golds)
    score.f1 = f1_needles(answers, golds)
    score.sub_em = sub_em_needles(answers, golds)
    score.strict = strict_match_needles(answers, golds) if boxes else 0.0


def score_ruler(final_reply: str | None, golds: Sequence[str]) -> Score:
    """QA metrics plus RULER's string_match_all/part; here ``golds`` are ALL the needles.

    - match_all / match_part: RULER's metrics on the whole final reply (``<think>`` stripped),
      not the box, so values spread over several boxes or given without one get RULER's credit.
    - One distinct needle (after normalisation): EM, F1, sub-EM and strict as :func:`score_qa`.
    - Several needles: every one is required, so one needle is never a full match. The answers
      are all the boxes (else the whole reply) and each is split into values at commas,
      semicolons and line breaks. EM: the set of normalised values equals the set of needles;
      strict (boxed only): the same with :func:`strict_match`'s lower-case, no-whitespace form;
      sub-EM: every needle occurs in the normalised answers; F1: against all needles joined.
    - A null (no text, or an empty last box) scores 0 everywhere, as for QA.
    """
    score = score_qa(final_reply, golds)
    if score.null:
        score.match_all = score.match_part = 0.0
        return score
    text = strip_think(final_reply or "")
    score.match_all = string_match_all(text, golds)
    score.match_part = string_match_part(text, golds)
    if len(set(_usable(golds))) > 1:
        _judge_all_needles(score, text, golds)
    return score


class Scorer(Protocol):
    """Anything that turns a final reply and gold answers into a :class:`Score`."""

    def __call__(self, final_reply: str | None, golds: Sequence[str], /) -> Score: ...


SCORERS: dict[str, Scorer] = {"qa": score_qa, "ruler": score_ruler}


def score_answer(final_reply: str | None, golds: Sequence[str], *, kind: str = "qa") -> Score:
    """Score an agent's final reply (None for a failed run) with the scorer for ``kind``."""
    if not golds:
        raise ValueError("cannot score against an empty list of gold answers")
    if kind not in SCORERS:
        raise ValueError(f"unknown scoring kind {kind!r}; expected one of {sorted(SCORERS)}")
    return SCORERS[kind](final_reply, golds)
