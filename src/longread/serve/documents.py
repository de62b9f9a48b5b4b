"""Where a chat request's document and question come from. Three conventions, tried in order:

1. ``longread.document``: the request's extension field (``extra_body`` in the openai client)
   holds the document; the last user message is the question.
2. File content parts: ``{"type": "file", "file": {"file_data": ..., "filename": ...}}`` in the
   user messages (a base64 ``data:`` URL, or plain text) are the document, joined in order; the
   text of the last user message is the question.
3. Plain messages, for clients that can send nothing else: every message before the last one
   (any role) is the document, joined by blank lines; the last message, the user's, is the
   question.

The response says which one applied (``Split``): a client never has to guess what was read.
"""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import APIError

EXTENSION = "longread.document"
FILES = "file"
MESSAGES = "messages"
_SNIFF = 8192  # like git, a NUL byte near the start means binary


@dataclass(frozen=True)
class Split:
    """How the request was read: ``source`` (``longread.document``, ``file`` or ``messages``),
    how many pieces were joined into the document, their file names, its size in bytes."""

    source: str
    parts: int
    document_bytes: int
    names: tuple[str, ...] = ()

    def header(self) -> str:
        """The ``x-longread-split`` header: e.g. ``source=file; parts=2; bytes=5012``."""
        return f"source={self.source}; parts={self.parts}; bytes={self.document_bytes}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "parts": self.parts,
            "document_bytes": self.document_bytes,
            "names": list(self.names),
        }


@dataclass(frozen=True)
class Extracted:
    """The question, the document, and how they were found."""

    question: str
    document: str
    split: Split


def extract(
    messages: Sequence[dict[str, Any]], document: str | None, max_document_bytes: int
) -> Extracted:
    """Split ``messages`` (and the extension's ``document``, when given) into the question and
    the document. APIError 400 when either is missing, 413 when the document is too large."""
    if not messages:
        raise _bad("messages must hold at least the question", "messages")
    parsed = [_Message.of(m, i) for i, m in enumerate(messages)]
    last = parsed[-1]
    if last.role != "user":
        raise _bad(
            f"the last message must be the user's question (role user), not {last.role}",
            f"messages.{len(parsed) - 1}.role",
        )
    question = last.text.strip()
    if not question:
        raise _bad("the last user message holds no question text", f"messages.{len(parsed) - 1}")
    files = [f for m in parsed for f in m.files]
    if document is not None:
        if files:
            raise _bad(
                "the document came both as longread.document and as file content parts; "
                "send it one way",
                "longread.document",
            )
        return _done(question, [document], Split(EXTENSION, 1, 0), max_document_bytes)
    if files:
        names = tuple(name for name, _ in files)
        return _done(
            question, [text for _, text in files], Split(FILES, len(files), 0, names),
            max_document_bytes,
        )  # fmt: skip
    earlier = [m.text for m in parsed[:-1] if m.text.strip()]
    if not earlier:
        raise _bad(
            "no document: send it as longread.document (extra_body), as a file content part, "
            "or as earlier messages before the question",
            "messages",
        )
    return _done(question, earlier, Split(MESSAGES, len(earlier), 0), max_document_bytes)


def _done(question: str, pieces: list[str], split: Split, limit: int) -> Extracted:
    document = "\n\n".join(pieces)
    size = len(document.encode("utf-8", errors="replace"))
    if size > limit:
        raise APIError(
            413,
            f"the document has {size} bytes; this server reads at most {limit} "
            "(longread serve --max-document-mb)",
            code="document_too_large",
        )
    if not document.strip():
        raise _bad("the document is empty", None)
    return Extracted(question, document, Split(split.source, split.parts, size, split.names))


@dataclass
class _Message:
    role: str
    text: str
    files: list[tuple[str, str]]  # (name, text)

    @classmethod
    def of(cls, message: dict[str, Any], index: int) -> _Message:
        role = str(message.get("role", ""))
        content = message.get("content")
        if content is None or isinstance(content, str):
            return cls(role, content or "", [])
        texts: list[str] = []
        files: list[tuple[str, str]] = []
        for number, part in enumerate(content):
            where = f"messages.{index}.content.{number}"
            kind = part.get("type")
            if kind == "text":
                texts.append(str(part.get("text") or ""))
            elif kind == "file":
                if role != "user":
                    raise _bad(f"file parts belong in user messages, not {role}", where)
                files.append(_file_text(part.get("file"), where, len(files) + 1))
            else:
                raise _bad(
                    f"content part type {kind!r} is not supported: longread reads text "
                    "(text and file parts)",
                    where,
                )
        return cls(role, "\n".join(texts), files)


def _file_text(file: Any, where: str, number: int) -> tuple[str, str]:
    """A file part's name and text: ``file_data`` as a ``data:`` URL (base64 or percent-
    encoded) or as plain text. Binary files (PDF, images) are refused: longread reads text."""
    if not isinstance(file, dict):
        raise _bad("a file part needs a file object with file_data", where)
    name = str(file.get("filename") or f"file {number}")
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
        return name, data
    raw, mime = _data_url_bytes(data, f"{where}.file.file_data")
    if mime == "application/pdf" or raw.startswith(b"%PDF"):
        raise _bad(f"{name} is a PDF; longread reads text: send the document's text", where)
    if b"\x00" in raw[:_SNIFF]:
        raise _bad(f"{name} looks like a binary file (NUL bytes), not text", where)
    return name, raw.decode("utf-8", errors="replace")


def _data_url_bytes(url: str, where: str) -> tuple[bytes, str]:
    header, comma, payload = url[len("data:") :].partition(",")
    if not comma:
        raise _bad("a data: URL needs a comma before its data", where)
    mime = header.split(";", 1)[0].strip().lower()
    if ";base64" not in header.lower():
        return urllib.parse.unquote_to_bytes(payload), mime
    try:
        return base64.b64decode(payload, validate=True), mime
    except (binascii.Error, ValueError):
        raise _bad("file_data is not valid base64", where) from None


def _bad(message: str, param: str | None) -> APIError:
    return APIError(400, message, code="invalid_request", param=param)
