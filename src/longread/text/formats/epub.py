"""EPUB: the spine's documents in reading order (ebooklib), each read as HTML.

Each chapter starts under its table-of-contents title; a heading inside it takes over from
there, as on a web page. The navigation document (the book's own table of contents) is not
part of the text.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ..reading import Warn
from ._blocks import Block, require
from .html import decode_html, html_blocks


def epub_blocks(path: str | Path, name: str, warn: Warn) -> Iterator[Block]:
    """Every chapter's paragraphs, in spine order, sectioned by TOC title and headings."""
    book = _read(path, name)
    ebooklib = require("ebooklib", "EPUB")
    titles = _toc_titles(book.toc)
    for item_id, *_ in book.spine:
        item = book.get_item_with_id(item_id)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT or _is_nav(item):
            continue
        title = titles.get(item.get_name())
        try:
            content = item.get_content()
        except Exception as error:  # a missing or damaged member: the rest is still worth reading
            warn(f"{name}: skipped {item.get_name()} ({error})")
            continue
        yield from html_blocks(decode_html(content), section=title)


def _read(path: str | Path, name: str) -> Any:
    epub = require("ebooklib.epub", "EPUB")
    try:
        with warnings.catch_warnings():  # ebooklib warns about its own future defaults
            warnings.simplefilter("ignore")
            return epub.read_epub(str(path), {"ignore_ncx": False})
    except Exception as error:  # zip, XML and ebooklib errors alike mean a damaged book
        raise UsageError(f"{name} is not a readable EPUB ({error})") from None


def _is_nav(item: Any) -> bool:
    return "nav" in (getattr(item, "properties", None) or []) or type(item).__name__ == "EpubNav"


def _toc_titles(toc: Any) -> dict[str, str]:
    """The first TOC title of each document (by its name in the book, fragments dropped)."""
    titles: dict[str, str] = {}
    stack = list(reversed(list(toc or [])))
    while stack:
        entry = stack.pop()
        if isinstance(entry, tuple | list):  # (section, children)
            stack.extend(reversed(list(entry)))
            continue
        href = getattr(entry, "href", None) or getattr(entry, "file_name", None)
        title = " ".join((getattr(entry, "title", None) or "").split())
        if href and title:
            titles.setdefault(href.split("#", 1)[0], title)
    return titles
