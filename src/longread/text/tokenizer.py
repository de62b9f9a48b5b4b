"""Tokenizer protocol: exact token counts for chunking and budgets."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Tokenizer(Protocol):
    """Counts and produces the token ids a model will see. Synchronous and CPU-bound:
    callers that hold an event loop run it in a worker thread.

    Two optional methods make chunking faster, never different: ``count_many(texts)``, the
    counts of many texts at once (chunking may call it from another thread while it calls
    ``count``), and ``cuts_between(left, right)``, True only where ``left + right`` provably
    tokenises as the two apart, so that counts add up."""

    name: str

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` with no BOS/special tokens added."""
        ...

    def count(self, text: str) -> int:
        """``len(encode(text))``, possibly faster."""
        ...
