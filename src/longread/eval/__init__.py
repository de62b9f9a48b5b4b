"""Evaluation: the canonical sample record and synthetic documents (more is being added)."""

from .needle import NEEDLE_QUESTION, needle_document, needle_document_of_length
from .records import Sample
from .scoring import SCORERS, Score, normalize_answer, score_answer, word_recall

__all__ = [
    "NEEDLE_QUESTION",
    "SCORERS",
    "Sample",
    "Score",
    "needle_document",
    "needle_document_of_length",
    "normalize_answer",
    "score_answer",
    "word_recall",
]
