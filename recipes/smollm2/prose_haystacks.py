"""Real-prose haystacks for the memory adapter's data (issue 26), as plain text files that
``longread data ruler --haystack FILE`` hides needles in.

- ``wiki``: the paragraphs of the HotpotQA training half (never its evaluation questions'),
  shuffled with a seed. A file haystack always starts at the file's first word, so each
  training set gets its own shuffle (``--seed``), or every document would share one prefix.
- ``docstrings``: the prose paragraphs of the standard library's own docstrings
  (``inspect.getdoc`` of every public module, class and function; Python 3.11 here, and
  another Python version gives another text, so a set built elsewhere may differ),
  shuffled with a seed: technical prose of the held-out text's genre, but not its text (no
  paragraph that shares eight words in a row with the held-out file).
- ``heldout``: the prose paragraphs of Python's own reference documentation
  (``pydoc_data.topics``: no code, no tables). Held out: no training set may use it; the
  committed ``recipes/smollm2/heldout/pydoc-prose.txt`` is the unseen-haystack evaluation's.

    python recipes/smollm2/prose_haystacks.py wiki HOTPOTQA.json EXCLUDE_IDS OUT.txt --seed 1
    python recipes/smollm2/prose_haystacks.py docstrings OUT.txt --seed 1
    python recipes/smollm2/prose_haystacks.py heldout recipes/smollm2/heldout/pydoc-prose.txt
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import random
import re
import sys
import warnings
from pathlib import Path

_BLANK_LINE = re.compile(r"\n\s*\n")
# reST or code a prose reader would not call prose: literal blocks, roles, tables, prompts
_NOT_PROSE = ("::", "*", "=", "|", ">>>", "``")
HELDOUT = Path(__file__).parent / "heldout" / "pydoc-prose.txt"
# Modules not imported for their docstrings: they act on import (open a browser, print, start
# a GUI) or only install or demonstrate.
_NOT_IMPORTED = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo",
                 "lib2to3", "ensurepip", "venv", "pydoc_data"}  # fmt: skip


def wiki_paragraphs(hotpotqa: Path, exclude: Path) -> list[str]:
    """Every context paragraph of the HotpotQA records whose id is not in ``exclude``."""
    held = set(exclude.read_text(encoding="utf-8").split())
    records = json.loads(hotpotqa.read_text(encoding="utf-8"))
    seen: set[str] = set()
    paragraphs = []
    for record in records:
        if record["_id"] in held:
            continue
        for _, sentences in record["context"]:
            text = " ".join("".join(sentences).split())
            if len(text.split()) >= 20 and text not in seen:
                seen.add(text)
                paragraphs.append(text)
    return paragraphs


def prose_blocks(text: str) -> list[str]:
    """The paragraphs of ``text`` that read as prose: unindented, no reST markup or code, at
    least 25 words, three quarters of them plain words."""
    paragraphs = []
    for block in _BLANK_LINE.split(text):
        if block.startswith("   ") or any(mark in block for mark in _NOT_PROSE):
            continue
        words = block.split()
        if len(words) >= 25 and sum(w.isalpha() for w in words) >= 0.75 * len(words):
            paragraphs.append(" ".join(words))
    return paragraphs


def pydoc_paragraphs() -> list[str]:
    """The prose paragraphs of Python's reference topics."""
    from pydoc_data.topics import topics

    return [p for name in sorted(topics) for p in prose_blocks(topics[name])]


def docstring_paragraphs(held_out: Path = HELDOUT) -> list[str]:
    """The prose paragraphs of the standard library's public docstrings, in module order,
    without any that shares eight words in a row with ``held_out``."""
    held = _shingles(held_out.read_text(encoding="utf-8"))
    seen: set[str] = set()
    paragraphs = []
    warnings.simplefilter("ignore")  # deprecated modules warn on import
    for name in sorted(sys.stdlib_module_names):
        if name.startswith("_") or name in _NOT_IMPORTED:
            continue
        try:
            module = importlib.import_module(name)
        except Exception:  # platform modules (winreg, msvcrt...) fail to import here
            continue
        for text in _docstrings(module):
            for paragraph in prose_blocks(text):
                if paragraph not in seen and not _shingles(paragraph) & held:
                    seen.add(paragraph)
                    paragraphs.append(paragraph)
    return paragraphs


def _docstrings(module) -> list[str]:
    """The docstrings of a module and of the public classes and functions it defines."""
    objects = [module] + [
        getattr(module, name) for name in sorted(dir(module)) if not name.startswith("_")
    ]
    docs = []
    for obj in objects:
        own = obj is module or getattr(obj, "__module__", None) == module.__name__
        if own and (inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isfunction(obj)):
            docs.append(inspect.getdoc(obj) or "")
    return docs


def _shingles(text: str, size: int = 8) -> set[tuple[str, ...]]:
    words = text.lower().split()
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    wiki = commands.add_parser("wiki", help="HotpotQA training paragraphs, shuffled")
    wiki.add_argument("hotpotqa", type=Path)
    wiki.add_argument("exclude", type=Path, help="ids of the evaluation half, one per line")
    wiki.add_argument("out", type=Path)
    wiki.add_argument("--seed", type=int, default=0)
    docstrings = commands.add_parser("docstrings", help="stdlib docstring prose, shuffled")
    docstrings.add_argument("out", type=Path)
    docstrings.add_argument("--seed", type=int, default=0)
    heldout = commands.add_parser("heldout", help="Python's reference prose (held out)")
    heldout.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.command == "wiki":
        paragraphs = wiki_paragraphs(args.hotpotqa, args.exclude)
        random.Random(args.seed).shuffle(paragraphs)
    elif args.command == "docstrings":
        paragraphs = docstring_paragraphs()
        random.Random(args.seed).shuffle(paragraphs)
    else:
        paragraphs = pydoc_paragraphs()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    words = sum(len(p.split()) for p in paragraphs)
    print(f"{args.out}: {len(paragraphs)} paragraphs, {words} words")


if __name__ == "__main__":
    main()
