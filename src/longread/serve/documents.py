"""Where a chat request's document and question come from. Three conventions, tried in order:

1. ``longread.document``: the request's extension field (``extra_body`` in the openai client)
   holds the document's text; the last user message is the question.
2. File content parts: ``{"type": "file", "file": {"file_data": ..., "filename": ...}}`` in the
   user messages (a base64 ``data:`` URL, or plain text) are the document, joined in order by
   blank lines. Each is read whatever its format (PDF, HTML, EPUB, DOCX, Markdown, text:
   ``uploads``), and the document remembers where each file's text lies (``DocumentFile``) and
   where its pages and sections start (a ``PositionMap``), so a citation can say "report.pdf,
   p. 2". The text of the last user message is the question.
3. Plain messages, for clients that can send nothing else: every message before the last one
   (any role) is the document, joined by blank lines; the last message, the user's, is the
   question.

The response says which one applied (``Split``): a client never has to guess what was read.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..text.positions import PositionMap
from .errors import APIError
from .uploads import Upload, read_part, too_large

EXTENSION = "longread.document"
FILES = "file"
MESSAGES = "messages"
_JOIN = "\n\n"


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
class DocumentFile:
    """One file of a document sent as file parts: its name, the format it was read as, and
    where its text lies in the joined document (``start``..``end``, characters)."""

    name: str
    format: str
    start: int
    end: int


@dataclass(frozen=True)
class Extracted:
    """The question, the document, how they were found, where the document's pages and
    sections start (empty when it came as text with none), and its files (file parts only)."""

    question: str
    document: str
    split: Split
    positions: PositionMap = field(default_factory=PositionMap)
    files: tuple[DocumentFile, ...] = ()


def file_at(files: Sequence[DocumentFile], offset: int) -> DocumentFile | None:
    """The file holding character ``offset`` of the joined document (None: no files)."""
    index = bisect_right([f.start for f in files], offset) - 1
    return files[index] if index >= 0 else None


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
        return _from_files(question, files, max_document_bytes)
    earlier = [m.text for m in parsed[:-1] if m.text.strip()]
    if not earlier:
        raise _bad(
            "no document: send it as longread.document (extra_body), as a file content part, "
            "or as earlier messages before the question",
            "messages",
        )
    return _done(question, earlier, Split(MESSAGES, len(earlier), 0), max_document_bytes)


def _done(
    question: str,
    pieces: list[str],
    split: Split,
    limit: int,
    positions: PositionMap | None = None,
    files: tuple[DocumentFile, ...] = (),
) -> Extracted:
    document = _JOIN.join(pieces)
    size = len(document.encode("utf-8", errors="replace"))
    if size > limit:
        raise too_large(size, limit)
    if not document.strip():
        raise _bad("the document is empty", None)
    split = Split(split.source, split.parts, size, split.names)
    return Extracted(question, document, split, positions or PositionMap(), files)


def _from_files(question: str, parts: list[_FilePart], limit: int) -> Extracted:
    """Read every file part (their raw bytes, all together, count against ``limit`` before
    any is parsed) and join their texts and position maps."""
    uploads: list[Upload] = []
    room = limit
    for part in parts:
        upload = read_part(part.file, part.where, len(uploads) + 1, room)
        room -= upload.raw_bytes
        uploads.append(upload)
    positions = PositionMap()
    files = []
    start = 0
    for upload in uploads:
        positions.extend(upload.positions, start)
        end = start + len(upload.text)
        files.append(DocumentFile(upload.name, upload.format, start, end))
        start = end + len(_JOIN)
    names = tuple(u.name for u in uploads)
    split = Split(FILES, len(uploads), 0, names)
    return _done(question, [u.text for u in uploads], split, limit, positions, tuple(files))


@dataclass(frozen=True)
class _FilePart:
    file: Any  # the part's ``file`` object, read once every part is known
    where: str


@dataclass
class _Message:
    role: str
    text: str
    files: list[_FilePart]

    @classmethod
    def of(cls, message: dict[str, Any], index: int) -> _Message:
        role = str(message.get("role", ""))
        content = message.get("content")
        if content is None or isinstance(content, str):
            return cls(role, content or "", [])
        texts: list[str] = []
        files: list[_FilePart] = []
        for number, part in enumerate(content):
            where = f"messages.{index}.content.{number}"
            kind = part.get("type")
            if kind == "text":
                texts.append(str(part.get("text") or ""))
            elif kind == "file":
                if role != "user":
                    raise _bad(f"file parts belong in user messages, not {role}", where)
                files.append(_FilePart(part.get("file"), where))
            else:
                raise _bad(
                    f"content part type {kind!r} is not supported: longread reads documents "
                    "(text and file parts)",
                    where,
                )
        return cls(role, "\n".join(texts), files)


def _bad(message: str, param: str | None) -> APIError:
    return APIError(400, message, code="invalid_request", param=param)
