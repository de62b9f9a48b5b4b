"""What a citation is: a span of the document's text that backs an answer."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Citation:
    """A span of the document that backs the answer.

    ``char_start``/``char_end`` are character offsets in the document's text (as the reader
    extracted it: for a PDF, the text layer), ``quote`` is that text, ``chunk`` the chunk it
    lies in, ``page`` and ``section`` where the reader located it (None where the format has
    none), ``line`` the memory line it backs (memory agents; None for rag and full).
    """

    quote: str
    char_start: int
    char_end: int
    chunk: int | None = None
    page: int | None = None
    section: str | None = None
    line: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Citation:
        return cls(**data)


@dataclass
class SourceSpan:
    """Where a memory line came from: the update that added ``line`` to the notes aligned it
    with ``chunk``'s text at ``char_start``..``char_end`` (document offsets; ``in_chunk`` is
    the start within the chunk; ``quote`` that text) with a fuzzy ``score`` of 0-100.
    ``inherited`` marks a line the update rewrote from an earlier note: its span is that
    note's."""

    line: str
    char_start: int
    char_end: int
    chunk: int
    in_chunk: int
    score: float
    quote: str = ""
    inherited: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SourceSpan:
        return cls(**data)
