"""Cut a document into consecutive chunks of at most ``max_tokens`` tokens, counted exactly.

The cut is lossless (the chunks' texts join back to the document) and prefers the coarsest
boundary that still leaves the chunk well filled: a paragraph end, else a sentence end, else a
space, else any character. The packer is fed one paragraph at a time and tokenises each paragraph
once; it splits a paragraph into sentences (and a sentence into words, a word into halves) only
when that piece does not fit and the chunk is not yet ``min_fill`` full.

Every piece starts with the whitespace before it (paragraph separators included), because
byte-level BPE tokenizers glue a leading space or newline to the next word: pieces cut that way
usually count the same alone as inside the chunk. "Usually" is not "always", so whenever a piece
seems not to fit, the chunk so far is counted again as a whole and that exact size decides; and
if a chunk's exact size overshoots when it is emitted, its last pieces move to the next chunk.
A tokenizer that can vouch for a join (``cuts_between``: no token spans it) spares that second
count: where it vouches for every join in the chunk, the sum of the pieces' counts is exact.
One that cannot but counts many texts at once (``count_many``: a server) is asked, with the
chunk it must count, for the next few chunks as the paragraphs' counts predict them: one round
trip then serves several chunks, and a wrong guess costs nothing but the guess (after a round
of guesses that all missed, only one chunk is guessed until a guess is right again).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import threading
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, overload

from ..errors import UsageError
from ._boundaries import sentence_cuts, split_at, word_cuts
from .formats import open_document
from .positions import PositionMap
from .reading import Warn, iter_paragraphs
from .tokenizer import Tokenizer

# Granularity of a piece; splitting a piece yields pieces of the next level.
_PARAGRAPH, _SENTENCE, _WORD, _CHARS = range(4)
# Whitespace-only paragraphs (e.g. a run of blank lines) are held until text follows; past this
# size they are passed on alone so that memory stays bounded.
_MAX_CARRIED_SPACE = 1 << 16
# Paragraphs counted together by a tokenizer with ``count_many``: enough to keep its threads
# busy, few enough that memory stays bounded (and a cancel is seen soon).
_COUNT_BATCH = 256
# Chunks guessed ahead, and counted together with the chunk the packer must count, by a
# tokenizer with ``count_many`` but no ``cuts_between``; the paragraphs read ahead for them.
_GUESSED_CHUNKS = 8

T = TypeVar("T")


@dataclass(frozen=True)
class Chunk:
    """One contiguous piece of a document; ``tokens`` is the exact count of ``text``, and
    ``start`` is where ``text`` begins in the document's text (a character offset: citations
    and the viewer map spans in a chunk back to the document through it)."""

    index: int
    text: str
    tokens: int
    start: int = 0

    @property
    def end(self) -> int:
        """The character offset just past the chunk's text in the document."""
        return self.start + len(self.text)


class ChunkingCancelled(Exception):
    """Raised inside a chunking thread whose caller has gone (Ctrl-C, SIGTERM, a cancelled
    task); never seen by the caller."""


def iter_chunks(
    paragraphs: Iterable[str],
    tokenizer: Tokenizer,
    max_tokens: int = 5000,
    min_fill: float = 0.8,
    *,
    cancel: threading.Event | None = None,
) -> Iterator[Chunk]:
    """Chunk a stream of paragraphs (as from ``iter_paragraphs``); see the module docstring.

    Each chunk has ``tokenizer.count(chunk.text) == chunk.tokens <= max_tokens``, and a cut falls
    on a coarser boundary whenever the chunk is at least ``min_fill * max_tokens`` full there.
    Once ``cancel`` is set, the next paragraph raises ``ChunkingCancelled``.
    """
    if isinstance(paragraphs, str):
        raise TypeError("iter_chunks takes a stream of paragraphs; use chunk_text for a str")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    if not 0.0 <= min_fill <= 1.0:
        raise ValueError(f"min_fill must be between 0 and 1, got {min_fill}")
    counted = _counted(_lead_with_separators(paragraphs), tokenizer)
    ahead = _Ahead(counted, _GUESSED_CHUNKS * max_tokens if _guesses(tokenizer) else 0)
    packer = _Packer(tokenizer, max_tokens, min_fill, ahead)
    while (item := ahead.next()) is not None:
        if cancel is not None and cancel.is_set():
            raise ChunkingCancelled
        paragraph, tokens = item
        yield from packer.feed(paragraph, _PARAGRAPH, tokens=tokens)
    yield from packer.finish()


def _guesses(tokenizer: Tokenizer) -> bool:
    """Whether guessing chunks ahead pays: the tokenizer counts many texts at once, and cannot
    vouch for joins (so that the packer counts every chunk as a whole)."""
    return hasattr(tokenizer, "count_many") and not hasattr(tokenizer, "cuts_between")


class _Ahead:
    """The counted paragraphs, read ``tokens`` tokens ahead of the packer (one paragraph when
    0), so that the packer can guess where the next chunks end."""

    def __init__(self, counted: Iterator[tuple[str, int | None]], tokens: int) -> None:
        self.counted = counted
        self.tokens = tokens
        self.items: deque[tuple[str, int | None]] = deque()
        self.held = 0  # the tokens in items

    def next(self) -> tuple[str, int | None] | None:
        """The next paragraph and its count (None: not counted), or None at the end."""
        while not self.items or self.held < self.tokens:
            item = next(self.counted, None)
            if item is None:
                break
            self.items.append(item)
            self.held += _weight(item)
        if not self.items:
            return None
        item = self.items.popleft()
        self.held -= _weight(item)
        return item


def _weight(item: tuple[str, int | None]) -> int:
    # At least 1: a stream of texts without tokens is still read only so far ahead.
    return max(item[1] or 0, 1)


def _counted(paragraphs: Iterable[str], tokenizer: Tokenizer) -> Iterator[tuple[str, int | None]]:
    """Each paragraph with its token count when the tokenizer counts many texts at once
    (``count_many``: in parallel, a batch of paragraphs at a time), else with None (the packer
    counts it). The next batch is counted while the packer works through this one, so that a
    server's round trips (or the library's threads) overlap the packer's own counts."""
    count_many = getattr(tokenizer, "count_many", None)
    if count_many is None:
        yield from ((paragraph, None) for paragraph in paragraphs)
        return
    batches = _batched(paragraphs, _COUNT_BATCH)
    first = next(batches, None)
    ahead = _CountAhead(count_many, first) if first else None
    while ahead is not None:
        batch, counts = ahead.result()
        upcoming = next(batches, None)
        ahead = _CountAhead(count_many, upcoming) if upcoming else None
        yield from zip(batch, counts, strict=True)


def _batched(items: Iterable[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class _CountAhead:
    """``count_many(batch)`` on a daemon thread (one that a cancelled chunking leaves behind
    holds nothing up); ``result`` waits for it."""

    def __init__(self, count_many: Callable[[list[str]], list[int]], batch: list[str]) -> None:
        self.count_many = count_many
        self.batch = batch
        self.counts: list[int] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="longread-counting", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.counts = self.count_many(self.batch)
        except BaseException as error:  # raised again by result(), in the chunking thread
            self.error = error

    def result(self) -> tuple[list[str], list[int]]:
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.batch, self.counts


def chunk_text(
    text: str,
    tokenizer: Tokenizer,
    max_tokens: int = 5000,
    min_fill: float = 0.8,
    *,
    cancel: threading.Event | None = None,
) -> list[Chunk]:
    """All chunks of ``text``; an empty text has none."""
    paragraphs = iter_paragraphs([text])
    return list(iter_chunks(paragraphs, tokenizer, max_tokens, min_fill, cancel=cancel))


async def achunk_text(
    text: str, tokenizer: Tokenizer, max_tokens: int = 5000, min_fill: float = 0.8
) -> list[Chunk]:
    """``chunk_text`` in a worker thread (tokenising a long text never blocks the event loop)
    that a cancelled caller does not wait for (see ``run_cancellable``)."""
    return await run_cancellable(
        lambda cancel: chunk_text(text, tokenizer, max_tokens, min_fill, cancel=cancel)
    )


async def achunk_file(
    path: str | Path,
    tokenizer: Tokenizer,
    max_tokens: int = 5000,
    min_fill: float = 0.8,
    *,
    warn: Warn | None = None,
    name: str | None = None,
    max_bytes: int | None = None,
) -> SpooledChunks:
    """Read and chunk ``path`` (``"-"`` = stdin, as text) in a worker thread, so that
    tokenising a large document never blocks the event loop; the chunks wait in a temporary
    file, not in memory (``SpooledChunks``). Any format ``open_document`` reads (PDF, HTML,
    EPUB, DOCX, Markdown, text); the chunks' ``positions`` (pages, sections) and ``format``
    are set once chunking is done. A cancelled caller (Ctrl-C, SIGTERM) does not wait for the
    thread. Raises UsageError as ``open_document`` does (which calls the file ``name`` and
    refuses one over ``max_bytes``)."""

    def work(cancel: threading.Event) -> SpooledChunks:
        chunks = SpooledChunks()
        try:
            document = open_document(path, name=name, max_bytes=max_bytes, warn=warn)
            paragraphs = iter_paragraphs(document.pieces)
            for chunk in iter_chunks(paragraphs, tokenizer, max_tokens, min_fill, cancel=cancel):
                chunks.append(chunk)
        except BaseException:
            chunks.close()
            raise
        chunks.positions, chunks.format = document.positions, document.format
        return chunks

    return await run_cancellable(work)


async def run_cancellable(work: Callable[[threading.Event], T]) -> T:
    """``work(cancel)`` in a daemon thread; its result, or its exception.

    Unlike ``asyncio.to_thread``, a cancelled caller returns at once: ``cancel`` is set (long
    work checks it and stops) and nobody waits for the thread. ``asyncio.run`` waits for the
    threads of its default executor before it lets Ctrl-C or SIGTERM end the process, which
    made a long chunking uninterruptible; a daemon thread holds up nothing, and whatever it
    is blocked in (a slow tokenize request, a read) ends with the process."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    cancel = threading.Event()

    def settle(result: T | None, error: BaseException | None) -> None:  # on the loop
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]  # T, as work returned it

    def target() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = work(cancel)
        except BaseException as exc:  # handed to the caller, who re-raises it
            error = exc
        if cancel.is_set():
            return  # nobody is waiting
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is waiting
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=target, name="longread-chunking", daemon=True).start()
    try:
        return await future
    finally:
        cancel.set()


class SpooledChunks(Sequence[Chunk]):
    """Chunks kept in an anonymous temporary file instead of in memory.

    The count and every chunk's token count are known at once; a chunk's text is read back
    when the chunk is asked for, so a document of any size costs memory for one chunk at a
    time (plus 24 bytes a chunk). Positional reads make concurrent readers safe. The file
    goes when ``close`` is called, the object is collected, or the process ends."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="longread-chunks-")  # noqa: SIM115 - closed by close()
        self._starts = array("q")
        self._sizes = array("q")
        self._tokens = array("q")
        self._offsets = array("q")  # each chunk's character offset in the document
        self._end = 0
        # Where the chunks' text came from (pages, sections) and the document's format; set
        # by whoever read the document (``achunk_file``) once all chunks are in.
        self.positions = PositionMap()
        self.format = "text"

    def append(self, chunk: Chunk) -> None:
        """Add the next chunk (its ``index`` must be the count so far)."""
        if chunk.index != len(self):
            raise ValueError(f"chunk {chunk.index} appended as chunk {len(self)}")
        data = chunk.text.encode("utf-8", "surrogatepass")
        os.pwrite(self._file.fileno(), data, self._end)
        self._starts.append(self._end)
        self._sizes.append(len(data))
        self._tokens.append(chunk.tokens)
        self._offsets.append(chunk.start)
        self._end += len(data)

    def token_counts(self) -> Sequence[int]:
        """Every chunk's token count, in order, without reading any text."""
        return self._tokens

    def __len__(self) -> int:
        return len(self._tokens)

    @overload
    def __getitem__(self, index: int) -> Chunk: ...
    @overload
    def __getitem__(self, index: slice) -> list[Chunk]: ...
    def __getitem__(self, index: int | slice) -> Chunk | list[Chunk]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"chunk {index} of {len(self)}")
        data = os.pread(self._file.fileno(), self._sizes[index], self._starts[index])
        text = data.decode("utf-8", "surrogatepass")
        return Chunk(index, text, self._tokens[index], self._offsets[index])

    def close(self) -> None:
        """Remove the file; the chunks can no longer be read."""
        self._file.close()

    def __enter__(self) -> SpooledChunks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _lead_with_separators(paragraphs: Iterable[str]) -> Iterator[str]:
    """Move each paragraph's trailing whitespace to the start of the next paragraph.

    The last paragraph keeps its trailing whitespace, so no whitespace-only piece is left over.
    """
    pending: str | None = None
    carry = ""
    for paragraph in paragraphs:
        body = paragraph.rstrip()
        if not body:
            carry += paragraph
            if len(carry) > _MAX_CARRIED_SPACE:
                if pending is not None:
                    yield pending
                pending, carry = carry, ""
            continue
        if pending is not None:
            yield pending
        pending, carry = carry + body, paragraph[len(body) :]
    tail = (pending or "") + carry
    if tail:
        yield tail


def _split(text: str, level: int) -> list[str]:
    """``text`` (a piece of ``level``) cut into pieces of the next finer level."""
    if level == _PARAGRAPH:
        return split_at(text, sentence_cuts(text))
    if level == _SENTENCE:
        return split_at(text, word_cuts(text))
    middle = len(text) // 2
    return [text[:middle], text[middle:]] if middle else [text]


class _Packer:
    """Packs pieces into the current chunk and emits chunks; see the module docstring."""

    def __init__(
        self, tokenizer: Tokenizer, max_tokens: int, min_fill: float, ahead: _Ahead | None = None
    ) -> None:
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.full_enough = min_fill * max_tokens
        # Paragraphs not fed yet, and the exact counts of the chunk texts guessed from them.
        self.ahead = ahead
        self.guessed: dict[str, int] = {}
        self.guessing = _GUESSED_CHUNKS  # how many to guess next time; 1 after all missed
        self.guesses_made = 0
        self.pieces: list[str] = []
        self.counts: list[int] = []  # each piece counted alone
        # Whether the tokenizer provably cuts between each piece and the one before it (see
        # _joins_cleanly); the first piece's entry is never read.
        self.clean: list[bool] = []
        # The chunk's size: exact right after _recount() and while every join since is clean,
        # else the last exact size plus the counts of the pieces added since.
        self.total = 0
        self.exact = True
        self.index = 0
        self.start = 0  # the next chunk's character offset in the document

    def feed(
        self, text: str, level: int, boundary: int | None = None, tokens: int | None = None
    ) -> Iterator[Chunk]:
        """Add ``text``, a piece of ``level`` that follows a boundary of level ``boundary``
        (default: ``level``) and counts ``tokens`` (counted here when None), emitting every
        chunk it completes."""
        boundary = level if boundary is None else boundary
        tokens = self.tokenizer.count(text) if tokens is None else tokens
        while self.total + tokens > self.max_tokens:
            if not self.exact:
                # Pieces rarely count the same alone as together; decide on the exact size.
                self._recount(pending=(text, tokens))
                continue
            atomic = level == _CHARS and len(text) == 1
            # Cutting early only pays at a real boundary: between two halves of a word there
            # is nothing better to wait for, so halving goes on until the chunk is full.
            early = boundary < _CHARS and self.total >= self.full_enough
            if self.pieces and (early or atomic):
                yield self._close()  # cut here; the retry sees an emptier chunk
                continue
            if atomic:
                raise UsageError(
                    f"max_tokens={self.max_tokens} is too small: the character {text!r} alone "
                    f"takes {tokens} tokens"
                )
            parts = _split(text, level)
            level = min(level + 1, _CHARS)
            if len(parts) > 1:
                counts = self._count_all(parts)  # each part is fed, so each is counted anyway
                yield from self.feed(parts[0], level, boundary, counts[0])
                for part, count in zip(parts[1:], counts[1:], strict=True):
                    yield from self.feed(part, level, tokens=count)
                return
        clean = self._joins_cleanly(text)
        self.pieces.append(text)
        self.counts.append(tokens)
        self.clean.append(clean)
        self.total += tokens
        self.exact = self.exact and clean

    def finish(self) -> Iterator[Chunk]:
        """Emit what is left."""
        while self.pieces:
            yield self._close()

    def _count_all(self, parts: list[str]) -> list[int]:
        """Each part's count, in one ``count_many`` where the tokenizer has one (a server:
        one round trip, or several at once, instead of one after another)."""
        count_many = getattr(self.tokenizer, "count_many", None)
        if count_many is None:
            return [self.tokenizer.count(part) for part in parts]
        return list(count_many(parts))

    def _joins_cleanly(self, text: str) -> bool:
        """Whether the chunk's size stays the sum of its pieces' when ``text`` is added: it is
        the first piece, or the tokenizer says no token can span the join (``cuts_between``,
        where it has one: exact counts that need no second pass over the chunk)."""
        if not self.pieces:
            return True
        cuts_between = getattr(self.tokenizer, "cuts_between", None)
        return cuts_between is not None and bool(cuts_between(self.pieces[-1], text))

    def _recount(self, pending: tuple[str, int] | None = None) -> None:
        self.total = self._count_joined(self.pieces, pending)
        self.exact = True

    def _count_joined(self, pieces: list[str], pending: tuple[str, int] | None = None) -> int:
        """The exact count of ``pieces`` joined: a guess counted earlier, else counted now, with
        the next chunks guessed when ``pending`` (the piece that did not fit) is given."""
        text = "".join(pieces)
        known = self.guessed.pop(text, None)
        if known is not None:
            return known
        if pending is None or self.ahead is None:
            return self.tokenizer.count(text)
        if self.guesses_made:
            # Pieces that count differently together than alone make every guess wrong:
            # guess one chunk only (a cheap probe) until one is right again.
            hit = len(self.guessed) < self.guesses_made
            self.guessing = _GUESSED_CHUNKS if hit else 1
        guesses = self._guess_chunks(pending)
        self.guesses_made = len(guesses)
        self.guessed = {}  # older guesses are stale: the packer went another way
        if not guesses:
            return self.tokenizer.count(text)
        counts = self.tokenizer.count_many([text, *guesses])  # type: ignore[attr-defined]
        self.guessed = dict(zip(guesses, counts[1:], strict=True))
        return int(counts[0])

    def _guess_chunks(self, pending: tuple[str, int]) -> list[str]:
        """The texts of the next chunks as the counts predict them, if the current chunk ends
        before ``pending``: whole pieces packed while their counts' sum fits (what the packer
        will count as a whole when the next piece does not fit)."""
        assert self.ahead is not None
        guesses: list[str] = []
        pieces, total = [pending[0]], pending[1]
        for text, tokens in self.ahead.items:
            if tokens is None or tokens > self.max_tokens or len(guesses) == self.guessing:
                break
            if total + tokens > self.max_tokens:
                guesses.append("".join(pieces))
                pieces, total = [], 0
            pieces.append(text)
            total += tokens
        return guesses

    def _close(self) -> Chunk:
        """Emit the current chunk; if its exact size overshoots, its last pieces move on to the
        next chunk."""
        if not self.exact:
            self._recount()
        keep = len(self.pieces)
        while self.total > self.max_tokens and keep > 1:
            keep = self._keep_without(self.total - self.max_tokens, keep)
            self.total = self._count_joined(self.pieces[:keep])
        # One piece alone always fits: it was only accepted because its own count did.
        assert self.total <= self.max_tokens, (self.total, self.max_tokens)
        chunk = Chunk(self.index, "".join(self.pieces[:keep]), self.total, self.start)
        self.index += 1
        self.start += len(chunk.text)
        del self.pieces[:keep], self.counts[:keep], self.clean[:keep]
        self.total = sum(self.counts)
        self.exact = all(self.clean[1:])
        return chunk

    def _keep_without(self, overshoot: int, keep: int) -> int:
        """How many leading pieces to keep so that at least ``overshoot`` tokens (and at least
        one piece) move to the next chunk."""
        moved = 0
        while keep > 1 and moved < overshoot:
            keep -= 1
            moved += self.counts[keep]
        return keep
