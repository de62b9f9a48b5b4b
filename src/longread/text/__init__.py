"""Text handling: read documents as streams, count tokens exactly, cut token-exact chunks."""

from .chunking import Chunk, achunk_file, chunk_text, iter_chunks
from .reading import iter_paragraphs, read_document
from .tokenizer import Tokenizer
from .tokenizers import ApproxTokenizer, HFTokenizer, LlamaCppTokenizer, ServerTokenizer

__all__ = [
    "ApproxTokenizer",
    "Chunk",
    "HFTokenizer",
    "LlamaCppTokenizer",
    "ServerTokenizer",
    "Tokenizer",
    "achunk_file",
    "chunk_text",
    "iter_chunks",
    "iter_paragraphs",
    "read_document",
]
