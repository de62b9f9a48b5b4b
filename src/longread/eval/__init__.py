"""Evaluation: synthetic documents (more datasets, scorers and the runner come later)."""

from .needle import NEEDLE_QUESTION, needle_document, needle_document_of_length

__all__ = ["NEEDLE_QUESTION", "needle_document", "needle_document_of_length"]
