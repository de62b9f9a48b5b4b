"""Tokenizer protocol: exact token counts for chunking and budgets."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Tokenizer(Protocol):
    """Counts and produces the token ids a model will see. Synchronous and CPU-bound:
    callers that hold an event loop run it in a worker thread."""

    name: str

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` with no BOS/special tokens added."""
        ...

    def count(self, text: str) -> int:
        """``len(encode(text))``, possibly faster."""
        ...
