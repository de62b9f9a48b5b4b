"""Needle-in-a-haystack documents for integration tests (re-exported from the package)."""

from longread.data.needle import NEEDLE_QUESTION as QUESTION
from longread.data.needle import needle_document

__all__ = ["QUESTION", "needle_document"]
