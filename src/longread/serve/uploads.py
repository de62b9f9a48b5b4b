"""A file content part turned into text: ``file_data`` decoded (a ``data:`` URL, base64 or
percent-encoded, or the text itself), its size checked, and the file read by
``longread.text.formats`` whatever its format (PDF, HTML, EPUB, DOCX, Markdown, text), with
the ``PositionMap`` that locates its pages or sections.
"""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..text.positions import PositionMap
from .errors import APIError


@dataclass(frozen=True)
class Upload:
    """One file part, read: its name, its text, where its pages/sections start in that text,
    the format the reader found (``pdf``, ``html``, ``text``...) and its size as sent."""

    name: str
    text: str
    positions: PositionMap
    format: str
    raw_bytes: int


def read_part(file: Any, where: str, number: int, room: int) -> Upload:
    """The file of a ``{"type": "file", "file": {...}}`` part. ``room``: the bytes of document
    still allowed (413 past it, before the file is parsed); ``number`` names an unnamed file.
    APIError 400 for a part that cannot be read, with the reader's one-line reason."""
    if not isinstance(file, dict):
        raise _bad("a file part needs a file object with file_data", where)
    name = str(file.get("filename") or f"file {number}")
    raw = _file_bytes(file, where)
    if len(raw) > room:
        raise too_large(len(raw), room, what=f"{name} has")
    text, positions, kind = _read(raw, name, where)
    return Upload(name, text, positions, kind, len(raw))


def too_large(size: int, limit: int, *, what: str = "the document has") -> APIError:
    """The 413 for a document (or one of its files) past ``--max-document-mb``."""
    return APIError(
        413,
        f"{what} {size} bytes; this server reads at most {limit} "
        "(longread serve --max-document-mb)",
        code="document_too_large",
    )


def _file_bytes(file: dict[str, Any], where: str) -> bytes:
    data = file.get("file_data")
    if data is None:
        if file.get("file_id"):
            raise _bad(
                "file_id refers to a file uploaded to OpenAI; longread keeps no files: "
                "send the content as file_data",
                f"{where}.file.file_id",
            )
        raise _bad("a file part needs file_data", f"{where}.file")
    if not isinstance(data, str):
        raise _bad("file_data must be a string (a data: URL or the text itself)", where)
    if not data.startswith("data:"):
        return data.encode("utf-8", errors="replace")
    return _data_url_bytes(data, f"{where}.file.file_data")


def _data_url_bytes(url: str, where: str) -> bytes:
    header, comma, payload = url[len("data:") :].partition(",")
    if not comma:
        raise _bad("a data: URL needs a comma before its data", where)
    if ";base64" not in header.lower():
        return urllib.parse.unquote_to_bytes(payload)
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise _bad("file_data is not valid base64", where) from None


def _read(raw: bytes, name: str, where: str) -> tuple[str, PositionMap, str]:
    """The reader sniffs the format from the bytes (the name only breaks ties, .md against
    .txt); its UsageError (encrypted, image-only, corrupt, no text, a missing extra) is the
    client's 400."""
    from ..text.formats import document_from_bytes  # the PDF/EPUB/DOCX libraries load lazily

    try:
        return document_from_bytes(raw, name=name)
    except UsageError as exc:
        message = str(exc) if name in str(exc) else f"{name}: {exc}"
        raise _bad(message, where) from None


def _bad(message: str, param: str | None) -> APIError:
    return APIError(400, message, code="invalid_request", param=param)
