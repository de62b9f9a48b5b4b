"""Citations by alignment: every answer traced back to the spans of the document that hold it,
with no help from the model. ``Provenance`` follows each note of a memory back to the chunk it
was read from; ``evidence`` picks the notes (or sentences) that hold the answer; ``locate``
adds pages and sections from a reader's ``PositionMap``."""

from .evidence import Evidence, chunk_evidence, memory_evidence, search_answer
from .locate import locate, place, sources_line
from .model import Citation, SourceSpan
from .provenance import Provenance

__all__ = [
    "Citation",
    "Evidence",
    "Provenance",
    "SourceSpan",
    "chunk_evidence",
    "locate",
    "memory_evidence",
    "place",
    "search_answer",
    "sources_line",
]
