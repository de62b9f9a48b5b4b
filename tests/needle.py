"""Needle-in-a-haystack documents (RULER's noise haystack) for integration tests."""

from __future__ import annotations

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
QUESTION = "What is the special magic number mentioned in the document?"


def needle_document(number: str, repeats: int = 140, depth: float = 0.5, per_paragraph: int = 4):
    """Noise paragraphs with one needle sentence at ``depth`` (0 = start, 1 = end)."""
    sentences = [NOISE] * repeats
    sentences.insert(int(depth * repeats), f"The special magic number is {number}.")
    paragraphs = [
        " ".join(sentences[i : i + per_paragraph]) for i in range(0, len(sentences), per_paragraph)
    ]
    return "\n\n".join(paragraphs) + "\n"
