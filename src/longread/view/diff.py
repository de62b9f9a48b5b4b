"""Word-level diff of two memories: what a memory rewrite kept, added and dropped."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

Op = Literal["equal", "insert", "delete"]
# A word with the whitespace after it, so the diff keeps the memory's own line breaks (a
# deleted last line keeps its newline, and the kept line after it stays on its own line).
_WORD = re.compile(r"\S+\s*")


@dataclass(frozen=True)
class Segment:
    """A run of words the two memories share (``equal``), or that only the new one has
    (``insert``) or only the old one had (``delete``)."""

    op: Op
    text: str


@dataclass(frozen=True)
class WordDiff:
    """The new memory as segments, with the counts a summary line shows."""

    segments: tuple[Segment, ...]
    inserted: int  # words
    deleted: int
    words: int  # words in the new memory

    @property
    def changed(self) -> bool:
        return bool(self.inserted or self.deleted)


def word_diff(old: str, new: str) -> WordDiff:
    """Compare ``old`` and ``new`` word by word (whitespace differences are not changes).

    ``autojunk=False``: with autojunk on, SequenceMatcher treats words that occur in more than
    1% of a text over 200 words as junk, so the repetitive memories small models write would
    show as rewritten when they were kept."""
    old_tokens, new_tokens = _WORD.findall(old), _WORD.findall(new)
    matcher = difflib.SequenceMatcher(
        None, [t.strip() for t in old_tokens], [t.strip() for t in new_tokens], autojunk=False
    )
    segments: list[Segment] = []
    inserted = deleted = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            segments.append(Segment("equal", "".join(new_tokens[j1:j2])))
            continue
        if tag in ("delete", "replace"):
            segments.append(Segment("delete", "".join(old_tokens[i1:i2])))
            deleted += i2 - i1
        if tag in ("insert", "replace"):
            segments.append(Segment("insert", "".join(new_tokens[j1:j2])))
            inserted += j2 - j1
    return WordDiff(tuple(segments), inserted, deleted, len(new_tokens))
