"""Where text may be cut without splitting a word: whitespace gaps, and which of them end a
sentence or a line.

Every cut is placed at the *start* of a whitespace run, so the next piece begins with the space
that precedes it. Byte-level BPE tokenizers attach a leading space to the following word, so
pieces cut this way usually tokenise to the same ids as the whole text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# A whitespace run followed by text (trailing whitespace is never a cut: it stays with the text
# before it), or the point right after a CJK full stop, which has no space after it.
_GAP = re.compile(r"\s+(?=\S)|(?<=[。！？])(?=\S)")
_SENTENCE_END = re.compile(r"[.!?…][\"'”’»)\]]{0,3}\Z")


def _ends_sentence(text: str, end: int) -> bool:
    # endpos makes \Z match at ``end``; four characters cover "." plus three closing marks.
    return _SENTENCE_END.search(text, max(0, end - 4), end) is not None


def word_cuts(text: str) -> Iterator[int]:
    """Positions (never 0) where a whitespace run followed by text starts."""
    for match in _GAP.finditer(text):
        if match.start() > 0:
            yield match.start()


def sentence_cuts(text: str) -> Iterator[int]:
    """Word cuts after a sentence end (``.!?`` and closing quotes) or holding a line break."""
    for match in _GAP.finditer(text):
        start, gap = match.start(), match.group()
        if start > 0 and (not gap or "\n" in gap or _ends_sentence(text, start)):
            yield start


def split_at(text: str, cuts: Iterator[int]) -> list[str]:
    """``text`` cut at the increasing positions ``cuts``."""
    pieces, last = [], 0
    for cut in cuts:
        pieces.append(text[last:cut])
        last = cut
    pieces.append(text[last:])
    return pieces


def best_cut(window: str) -> int:
    """Where to end a piece of at most ``len(window)`` characters: the last line break in the
    window's second half, else the last sentence end there, else the last space, else the end."""
    line = sentence = word = 0
    for match in _GAP.finditer(window, len(window) // 2):
        start, gap = match.start(), match.group()
        if start == 0:
            continue
        word = start
        if "\n" in gap:
            line = start
        elif not gap or _ends_sentence(window, start):
            sentence = start
    return line or sentence or word or len(window)
