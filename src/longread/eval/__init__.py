"""Evaluation: one judge (scoring), a resumable runner over a run folder's store, and reports."""

from .scoring import SCORERS, Score, normalize_answer, score_answer, word_recall

__all__ = [
    "SCORERS",
    "Score",
    "normalize_answer",
    "score_answer",
    "word_recall",
]
