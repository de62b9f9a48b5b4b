"""HTML: the visible text of a page (selectolax, the lexbor parser), one block per paragraph.

Scripts, styles, navigation and the head are dropped; block elements (paragraphs, list items,
table rows, divs...) each become a paragraph; the text of an ``h1``-``h6`` becomes the section
of what follows it. The EPUB reader uses this for each chapter.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from typing import Any

from ._blocks import Block, require

# Never shown as text (or not the page's content: menus, forms' widgets, drawings).
_SKIP = frozenset(
    [
        "head",
        "script",
        "style",
        "noscript",
        "template",
        "nav",
        "iframe",
        "object",
        "embed",
        "svg",
        "math",
        "canvas",
        "select",
        "button",
        "input",
        "textarea",
    ]
)
_HEADINGS = frozenset(f"h{level}" for level in range(1, 7))
_BLOCKS = _HEADINGS | frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "center",
        "dd",
        "details",
        "dialog",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "header",
        "hgroup",
        "hr",
        "html",
        "legend",
        "li",
        "main",
        "menu",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "thead",
        "tfoot",
        "tr",
        "ul",
    ]
)
_CELLS = frozenset(("td", "th"))
_SPACES = re.compile(r"\s+")
_LINE_EDGES = re.compile(r" *\n *")
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([\w.:-]+)", re.IGNORECASE)
_MAX_SECTION_CHARS = 200


def decode_html(data: bytes) -> str:
    """``data`` as text: by its BOM, else its ``<meta charset>``, else UTF-8 (bad bytes become
    U+FFFD)."""
    for bom, encoding in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16")):
        if data.startswith(bom):
            return data.decode(encoding, "replace")
    if data.startswith(codecs.BOM_UTF16_BE):
        return data.decode("utf-16", "replace")
    declared = _META_CHARSET.search(data[:4096])
    if declared:
        try:
            return data.decode(declared.group(1).decode("ascii"), "replace")
        except LookupError:
            pass  # an unknown charset name: UTF-8 is the best guess
    return data.decode("utf-8", "replace")


def html_blocks(markup: str, section: str | None = None) -> Iterator[Block]:
    """The page's paragraphs as blocks, starting under ``section`` (a chapter's title)."""
    parser = require("selectolax.lexbor", "HTML")
    root = parser.LexborHTMLParser(markup).root
    if root is None:
        return
    state = _Text(section)
    for leaving, node in _walk(root):
        tag = node.tag
        if tag == "-text":
            state.add(node.text_content or "")
        elif tag in _BLOCKS:
            yield from state.block_edge(tag, leaving)
        elif tag == "br" and not leaving:
            state.add("\n", raw=True)
        elif tag in _CELLS and not leaving:
            state.cell()
    yield from state.flush()


def _walk(root: Any) -> Iterator[tuple[bool, Any]]:
    """``(leaving, node)`` for every node under ``root`` in document order, each element
    entered and left, skipped elements not at all. A stack, not recursion: pages nest deeper
    than Python's recursion limit."""
    stack: list[tuple[bool, Any]] = [(False, root)]
    while stack:
        leaving, node = stack.pop()
        if node.tag in _SKIP or node.is_comment_node:
            continue
        yield leaving, node
        if leaving or node.tag == "-text":
            continue
        stack.append((True, node))
        children = list(node.iter(include_text=True))
        stack.extend((False, child) for child in reversed(children))


class _Text:
    """The paragraph being gathered, the section it is under, and whether it is preformatted."""

    def __init__(self, section: str | None) -> None:
        self.parts: list[str] = []
        self.section = section
        self.pre = 0  # depth of <pre> elements we are in

    def add(self, text: str, *, raw: bool = False) -> None:
        self.parts.append(text if raw or self.pre else _SPACES.sub(" ", text))

    def cell(self) -> None:
        if "".join(self.parts).strip():
            self.parts.append(" | ")

    def block_edge(self, tag: str, leaving: bool) -> Iterator[Block]:
        """A block element starts or ends: the paragraph so far is complete."""
        if tag in _HEADINGS and leaving:
            title = _SPACES.sub(" ", "".join(self.parts)).strip()
            if title:
                self.section = title[:_MAX_SECTION_CHARS]
        yield from self.flush()
        if tag == "pre":
            self.pre += -1 if leaving else 1

    def flush(self) -> Iterator[Block]:
        text = "".join(self.parts)
        self.parts = []
        text = text.strip("\n") if self.pre else _LINE_EDGES.sub("\n", text).strip()
        if text:
            yield Block(text, section=self.section)
