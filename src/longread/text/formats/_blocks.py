"""What every reader of a structured format produces: blocks of text with their page and
section, joined here into one text whose positions are recorded as the text streams out."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import ModuleType

from ...errors import UsageError
from ..positions import PositionMap

PARAGRAPH_BREAK = "\n\n"


@dataclass(frozen=True)
class Block:
    """A run of text on ``page`` under ``section``. ``separator`` goes before it unless it is
    the first block: a blank line between paragraphs and pages, "" for a block that continues
    the one before (a page split where a heading starts)."""

    text: str
    page: int | None = None
    section: str | None = None
    separator: str = PARAGRAPH_BREAK


def join_blocks(
    blocks: Iterable[Block], positions: PositionMap, *, name: str, empty: str
) -> Iterator[str]:
    """The blocks' texts with their separators, in pieces; each block's page and section is
    anchored in ``positions`` at the character where it starts. Blocks with no text are
    dropped. Raises UsageError(f"{name} {empty}") after the last block if none had text."""
    offset = 0
    for block in blocks:
        if not block.text or block.text.isspace():
            continue
        if offset:
            yield block.separator
            offset += len(block.separator)
        if positions or block.page is not None or block.section is not None:
            positions.add(offset, page=block.page, section=block.section)
        yield block.text
        offset += len(block.text)
    if not offset:
        raise UsageError(f"{name} {empty}")


# The module each format needs, and what the user is told to install when it is missing.
_EXTRA = "the docs extra: pip install 'longread[docs]'"


def require(module: str, what: str) -> ModuleType:
    """Import ``module`` (a reader's library), or say which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(f"reading {what} files needs {_EXTRA}") from None
