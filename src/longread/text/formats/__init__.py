"""Documents in every format longread reads (PDF, HTML, EPUB, DOCX, Markdown, plain text),
turned into one text plus a ``PositionMap`` of where each part came from (page, section).

The readers of binary formats need the ``docs`` extra (pypdfium2, selectolax, ebooklib,
python-docx); each library is imported only when its format is read.
"""

from .document import (
    FORMATS,
    DocumentText,
    check_document_text,
    document_from_bytes,
    open_document,
)
from .sniff import sniff_format

__all__ = [
    "FORMATS",
    "DocumentText",
    "check_document_text",
    "document_from_bytes",
    "open_document",
    "sniff_format",
]
