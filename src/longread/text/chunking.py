"""Cut a document into consecutive chunks of at most ``max_tokens`` tokens, counted exactly.

The cut is lossless (the chunks' texts join back to the document) and prefers the coarsest
boundary that still leaves the chunk well filled: a paragraph end, else a sentence end, else a
space, else any character. The packer is fed one paragraph at a time and tokenises each paragraph
once; it splits a paragraph into sentences (and a sentence into words, a word into halves) only
when that piece does not fit and the chunk is not yet ``min_fill`` full.

Every piece starts with the whitespace before it (paragraph separators included), because
byte-level BPE tokenizers glue a leading space or newline to the next word: pieces cut that way
usually count the same alone as inside the chunk. "Usually" is not "always", so each chunk is
counted again as a whole before it is emitted, and trimmed if the merge of its pieces overshoots.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ._boundaries import sentence_cuts, split_at, word_cuts
from .reading import Warn, iter_paragraphs, read_document
from .tokenizer import Tokenizer

# Granularity of a piece; splitting a piece yields pieces of the next level.
_PARAGRAPH, _SENTENCE, _WORD, _CHARS = range(4)
# Whitespace-only paragraphs (e.g. a run of blank lines) are held until text follows; past this
# size they are passed on alone so that memory stays bounded.
_MAX_CARRIED_SPACE = 1 << 16


@dataclass(frozen=True)
class Chunk:
    """One contiguous piece of a document; ``tokens`` is the exact count of ``text``."""

    index: int
    text: str
    tokens: int


def iter_chunks(
    paragraphs: Iterable[str],
    tokenizer: Tokenizer,
    max_tokens: int = 5000,
    min_fill: float = 0.8,
) -> Iterator[Chunk]:
    """Chunk a stream of paragraphs (as from ``iter_paragraphs``); see the module docstring.

    Each chunk has ``tokenizer.count(chunk.text) == chunk.tokens <= max_tokens``, and a cut falls
    on a coarser boundary whenever the chunk is at least ``min_fill * max_tokens`` full there.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    if not 0.0 <= min_fill <= 1.0:
        raise ValueError(f"min_fill must be between 0 and 1, got {min_fill}")
    packer = _Packer(tokenizer, max_tokens, min_fill)
    for paragraph in _lead_with_separators(paragraphs):
        yield from packer.feed(paragraph, _PARAGRAPH)
    yield from packer.finish()


def chunk_text(
    text: str, tokenizer: Tokenizer, max_tokens: int = 5000, min_fill: float = 0.8
) -> list[Chunk]:
    """All chunks of ``text``; an empty text has none."""
    return list(iter_chunks(iter_paragraphs([text]), tokenizer, max_tokens, min_fill))


async def achunk_file(
    path: str | Path,
    tokenizer: Tokenizer,
    max_tokens: int = 5000,
    min_fill: float = 0.8,
    *,
    warn: Warn | None = None,
) -> list[Chunk]:
    """Read and chunk ``path`` (``"-"`` = stdin) in a worker thread, so that tokenising a large
    document never blocks the event loop. Raises UsageError as ``read_document`` does."""

    def work() -> list[Chunk]:
        paragraphs = iter_paragraphs(read_document(path, warn=warn))
        return list(iter_chunks(paragraphs, tokenizer, max_tokens, min_fill))

    return await asyncio.to_thread(work)


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

    def __init__(self, tokenizer: Tokenizer, max_tokens: int, min_fill: float) -> None:
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.full_enough = min_fill * max_tokens
        self.pieces: list[str] = []
        self.counts: list[int] = []
        self.index = 0

    def feed(self, text: str, level: int, tokens: int | None = None) -> Iterator[Chunk]:
        """Add ``text`` (a piece of ``level``), emitting every chunk it completes."""
        tokens = self.tokenizer.count(text) if tokens is None else tokens
        while sum(self.counts) + tokens > self.max_tokens:
            atomic = level == _CHARS and len(text) == 1
            if self.pieces and (sum(self.counts) >= self.full_enough or atomic):
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
                for part in parts:
                    yield from self.feed(part, level)
                return
        self.pieces.append(text)
        self.counts.append(tokens)

    def finish(self) -> Iterator[Chunk]:
        """Emit what is left."""
        while self.pieces:
            yield self._close()

    def _close(self) -> Chunk:
        """Emit the current chunk, counted exactly; pieces that make it overshoot move on to
        the next chunk."""
        keep = len(self.pieces)
        text = "".join(self.pieces)
        tokens = self.tokenizer.count(text)
        while tokens > self.max_tokens and keep > 1:
            keep = self._keep_without(tokens - self.max_tokens, keep)
            text = "".join(self.pieces[:keep])
            tokens = self.tokenizer.count(text)
        # One piece alone always fits: it was only accepted because its own count did.
        assert tokens <= self.max_tokens, (tokens, self.max_tokens)
        del self.pieces[:keep], self.counts[:keep]
        self.index += 1
        return Chunk(self.index - 1, text, tokens)

    def _keep_without(self, overshoot: int, keep: int) -> int:
        """How many leading pieces to keep so that at least ``overshoot`` tokens (and at least
        one piece) move to the next chunk."""
        moved = 0
        while keep > 1 and (moved < overshoot or moved == 0):
            keep -= 1
            moved += self.counts[keep]
        return keep
