"""Text handling: read documents as streams, count tokens exactly, cut token-exact chunks."""

from .chunking import (
    Chunk,
    SpooledChunks,
    achunk_file,
    achunk_text,
    chunk_text,
    iter_chunks,
    run_cancellable,
)
from .reading import iter_paragraphs, read_document
from .tokenizer import Tokenizer
from .tokenizers import ApproxTokenizer, HFTokenizer, LlamaCppTokenizer, ServerTokenizer

__all__ = [
    "ApproxTokenizer",
    "Chunk",
    "HFTokenizer",
    "LlamaCppTokenizer",
    "ServerTokenizer",
    "SpooledChunks",
    "Tokenizer",
    "achunk_file",
    "achunk_text",
    "chunk_text",
    "iter_chunks",
    "iter_paragraphs",
    "read_document",
    "run_cancellable",
]
