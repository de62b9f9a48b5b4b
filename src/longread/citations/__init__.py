"""Citations by alignment: every answer traced back to the spans of the document that hold it,
with no help from the model (see ``align`` and ``provenance``)."""

from .model import Citation, SourceSpan

__all__ = ["Citation", "SourceSpan"]
