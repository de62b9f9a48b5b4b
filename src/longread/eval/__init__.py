"""Evaluation: the canonical sample record and synthetic documents (more is being added)."""

from .needle import NEEDLE_QUESTION, needle_document, needle_document_of_length
from .records import Sample

__all__ = ["NEEDLE_QUESTION", "Sample", "needle_document", "needle_document_of_length"]
