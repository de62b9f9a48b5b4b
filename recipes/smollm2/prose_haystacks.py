"""Real-prose haystacks for the memory adapter's data (issue 26), as plain text files that
``longread data ruler --haystack FILE`` hides needles in.

- ``wiki``: the paragraphs of the HotpotQA training half (never its evaluation questions'),
  shuffled with a seed. A file haystack always starts at the file's first word, so each
  training set gets its own shuffle (``--seed``), or every document would share one prefix.
- ``heldout``: the prose paragraphs of Python's own reference documentation
  (``pydoc_data.topics``: no code, no tables). Held out: no training set may use it; the
  committed ``recipes/smollm2/heldout/pydoc-prose.txt`` is the unseen-haystack evaluation's.

    python recipes/smollm2/prose_haystacks.py wiki HOTPOTQA.json EXCLUDE_IDS OUT.txt --seed 1
    python recipes/smollm2/prose_haystacks.py heldout recipes/smollm2/heldout/pydoc-prose.txt
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

_BLANK_LINE = re.compile(r"\n\s*\n")
# reST or code a prose reader would not call prose: literal blocks, roles, tables, prompts
_NOT_PROSE = ("::", "*", "=", "|", ">>>", "``")


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


def pydoc_paragraphs() -> list[str]:
    """The paragraphs of Python's reference topics that read as prose: unindented, no reST
    markup or code, at least 25 words, three quarters of them plain words."""
    from pydoc_data.topics import topics

    paragraphs = []
    for name in sorted(topics):
        for block in _BLANK_LINE.split(topics[name]):
            if block.startswith("   ") or any(mark in block for mark in _NOT_PROSE):
                continue
            words = block.split()
            if len(words) >= 25 and sum(w.isalpha() for w in words) >= 0.75 * len(words):
                paragraphs.append(" ".join(words))
    return paragraphs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    wiki = commands.add_parser("wiki", help="HotpotQA training paragraphs, shuffled")
    wiki.add_argument("hotpotqa", type=Path)
    wiki.add_argument("exclude", type=Path, help="ids of the evaluation half, one per line")
    wiki.add_argument("out", type=Path)
    wiki.add_argument("--seed", type=int, default=0)
    heldout = commands.add_parser("heldout", help="Python's reference prose (held out)")
    heldout.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.command == "wiki":
        paragraphs = wiki_paragraphs(args.hotpotqa, args.exclude)
        random.Random(args.seed).shuffle(paragraphs)
    else:
        paragraphs = pydoc_paragraphs()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    words = sum(len(p.split()) for p in paragraphs)
    print(f"{args.out}: {len(paragraphs)} paragraphs, {words} words")


if __name__ == "__main__":
    main()
