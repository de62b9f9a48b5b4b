"""Needle-in-a-haystack documents: one fact hidden in RULER's repeated "noise" haystack."""

from __future__ import annotations

from ..text.tokenizer import Tokenizer

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE_QUESTION = "What is the special magic number mentioned in the document?"


def needle_document(
    number: str, repeats: int = 140, depth: float = 0.5, per_paragraph: int = 4
) -> str:
    """``repeats`` noise sentences in paragraphs of ``per_paragraph``, with the sentence
    "The special magic number is NUMBER." inserted at ``depth`` (0 = start, 1 = end)."""
    if not 0.0 <= depth <= 1.0:
        raise ValueError("depth must be between 0 and 1")
    sentences = [NOISE] * repeats
    sentences.insert(int(depth * repeats), f"The special magic number is {number}.")
    paragraphs = [
        " ".join(sentences[i : i + per_paragraph]) for i in range(0, len(sentences), per_paragraph)
    ]
    return "\n\n".join(paragraphs) + "\n"


def needle_document_of_length(
    number: str, tokens: int, tokenizer: Tokenizer, depth: float = 0.5
) -> str:
    """A needle document of about ``tokens`` tokens (within one noise sentence)."""
    per_repeat = tokenizer.count(needle_document(number, 101)) - tokenizer.count(
        needle_document(number, 100)
    )
    base = tokenizer.count(needle_document(number, 0))
    repeats = max(1, round((tokens - base) / max(per_repeat, 1)))
    return needle_document(number, repeats, depth)
