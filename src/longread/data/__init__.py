"""Evaluation data: the canonical ``Sample``, loaders for the papers' formats, and the builders
of RULER, RULER-HQA (HotpotQA) and needle documents."""

from .builders import build_hotpotqa, build_hotpotqa_to_length
from .loaders import DATA_SUFFIXES, data_files, load_files, load_samples, save_samples
from .needle import NEEDLE_QUESTION, needle_document, needle_document_of_length
from .records import Sample
from .ruler import RULER_TASKS, build_ruler

__all__ = [
    "DATA_SUFFIXES",
    "NEEDLE_QUESTION",
    "RULER_TASKS",
    "Sample",
    "build_hotpotqa",
    "build_hotpotqa_to_length",
    "build_ruler",
    "data_files",
    "load_files",
    "load_samples",
    "needle_document",
    "needle_document_of_length",
    "save_samples",
]
