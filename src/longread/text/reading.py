"""Stream a text document from disk or stdin, and regroup the stream into paragraphs.

Documents can be far larger than memory should hold, so nothing here reads a file whole: bytes
arrive in blocks, are decoded incrementally, and paragraphs are cut from a bounded buffer.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import UsageError
from ._boundaries import best_cut

log = logging.getLogger(__name__)

BLOCK_BYTES = 1 << 20
SNIFF_BYTES = 8192  # like git, look for NUL bytes near the start only
MAX_PARAGRAPH_CHARS = 1 << 16

Warn = Callable[[str], None]

# A line break followed by one or more blank (or whitespace-only) lines.
_PARAGRAPH_END = re.compile(r"\n(?:[^\S\n]*\n)+")
_SPACES_TO_END = re.compile(r"[^\S\n]*\Z")


# The stdlib "replace" handler does not say how many bytes it replaced; this one does the same
# replacement and tallies the bytes into whichever counter the decoding thread has set.
_ERRORS = "longread-count-replace"
_tally = threading.local()


def _count_and_replace(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    counter = getattr(_tally, "counter", None)
    if counter is not None:
        counter[0] += error.end - error.start
    return "\ufffd", error.end


codecs.register_error(_ERRORS, _count_and_replace)


def read_document(
    path: str | Path,
    *,
    warn: Warn | None = None,
    block_bytes: int = BLOCK_BYTES,
    name: str | None = None,
) -> Iterator[str]:
    """Yield the text of ``path`` (``"-"`` = stdin) as decoded pieces of about ``block_bytes``.

    UTF-8 with a leading BOM stripped; invalid bytes become U+FFFD and one message, sent to
    ``warn`` (default: a logging warning) after the last piece, says how many bytes were replaced.
    Raises UsageError, on the first iteration, for a missing, unreadable or binary file, and
    after the last piece for one without text (empty or only whitespace). Messages call the
    file ``name`` (default: its path, or "stdin").
    """
    name = name or ("stdin" if str(path) == "-" else str(path))
    warn = warn or log.warning
    replaced = [0]
    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors=_ERRORS)
    got_text = False
    with _open_binary(path, name) as stream:
        for block in _blocks(stream, name, block_bytes):
            text = _decode(decoder, block, replaced)
            if text:
                got_text = got_text or not text.isspace()
                yield text
    if not got_text:
        raise UsageError(f"{name} is empty (no text to read)")
    if replaced[0]:
        warn(f"{name}: {replaced[0]} bytes that are not valid UTF-8 were replaced with U+FFFD")


def check_document(path: str | Path, *, name: str | None = None) -> None:
    """Raise UsageError now, as ``read_document`` would, if ``path`` holds no text to read
    (missing, unreadable, binary, empty or only whitespace). Reads up to the first words only,
    so a caller can refuse a bad file before it contacts a model. Not for stdin, which it
    would consume."""
    for piece in read_document(path, warn=lambda _: None, name=name):
        if not piece.isspace():
            return


@contextlib.contextmanager
def _open_binary(path: str | Path, name: str) -> Iterator[BinaryIO]:
    if str(path) == "-":
        yield sys.stdin.buffer  # not ours to close
        return
    try:
        stream = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except OSError as error:
        raise cannot_open(error, name, "a text file") from None
    with stream:
        yield stream


def cannot_open(error: OSError, name: str, kind: str) -> UsageError:
    """The one-line error for a file that could not be opened; ``kind`` is what it should
    have been ("a text file", "a document")."""
    if isinstance(error, FileNotFoundError):
        return UsageError(f"{name} does not exist")
    if isinstance(error, IsADirectoryError):
        return UsageError(f"{name} is a directory, not {kind}")
    if isinstance(error, PermissionError):
        return UsageError(f"{name} is not readable (permission denied)")
    return UsageError(f"cannot open {name}: {error.strerror or error}")


def _blocks(stream: BinaryIO, name: str, block_bytes: int) -> Iterator[bytes]:
    """The stream's blocks, the first one checked for binary content, then ``b""`` once at EOF."""
    first = True
    while True:
        try:
            block = stream.read(block_bytes)
        except OSError as error:
            raise UsageError(f"cannot read {name}: {error.strerror or error}") from None
        if first:
            _refuse_binary(block[:SNIFF_BYTES], name)
            first = False
        yield block
        if not block:
            return


def _refuse_binary(head: bytes, name: str) -> None:
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise UsageError(f"{name} is UTF-16 text; convert it to UTF-8 first (iconv -t UTF-8)")
    if b"\0" in head:
        raise UsageError(f"{name} looks like a binary file (NUL bytes), not text")


def _decode(decoder: codecs.IncrementalDecoder, block: bytes, replaced: list[int]) -> str:
    # Set the tally for this call only: several documents may be read in one thread, interleaved.
    _tally.counter = replaced
    try:
        return decoder.decode(block, final=not block)
    finally:
        _tally.counter = None


def iter_paragraphs(pieces: Iterable[str], max_chars: int = MAX_PARAGRAPH_CHARS) -> Iterator[str]:
    """Regroup a stream of text pieces into paragraphs, each ending with its blank-line separator.

    ``"".join(paragraphs) == "".join(pieces)`` exactly. A paragraph longer than ``max_chars`` is
    yielded in pieces cut at a line break, sentence end or space, so memory stays bounded.
    """
    pending: list[str] = []
    fresh = 0  # characters received since the last scan
    for piece in pieces:
        pending.append(piece)
        fresh += len(piece)
        # Scan only once enough new text has arrived: rescanning the kept remainder after every
        # tiny piece would be quadratic.
        if fresh >= max_chars:
            done, rest = _scan("".join(pending), max_chars, final=False)
            yield from done
            pending, fresh = [rest], 0
    done, _ = _scan("".join(pending), max_chars, final=True)
    yield from done


def _scan(buffer: str, max_chars: int, *, final: bool) -> tuple[list[str], str]:
    """The complete paragraphs at the start of ``buffer`` and the incomplete rest (at most
    ``max_chars`` long); with ``final``, everything is complete."""
    done: list[str] = []
    start = 0
    for match in _PARAGRAPH_END.finditer(buffer):
        if not final and _SPACES_TO_END.match(buffer, match.end()):
            break  # more blank lines may follow in the next piece
        done.extend(_capped(buffer, start, match.end(), max_chars))
        start = match.end()
    if final:
        done.extend(_capped(buffer, start, len(buffer), max_chars))
        return [p for p in done if p], ""
    while len(buffer) - start > max_chars:
        cut = start + best_cut(buffer[start : start + max_chars])
        done.append(buffer[start:cut])
        start = cut
    return done, buffer[start:]


def _capped(buffer: str, start: int, end: int, max_chars: int) -> Iterator[str]:
    """``buffer[start:end]`` in pieces of at most ``max_chars``."""
    while end - start > max_chars:
        cut = start + best_cut(buffer[start : start + max_chars])
        yield buffer[start:cut]
        start = cut
    yield buffer[start:end]
