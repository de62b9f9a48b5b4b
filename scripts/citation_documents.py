"""A real PDF and a real EPUB, several chunks long, to measure citations on (issue 27, item 3).

    .venv/bin/python scripts/citation_documents.py make     # writes results/citations/documents/
    .venv/bin/python scripts/citation_documents.py measure [-- ASK FLAGS]
        # asks; appends to documents.jsonl there, labelled with the flags

``make`` prints a 16-page report to PDF with Debian's chromium (``--print-to-pdf``) and builds an
8-chapter e-book with ebooklib, from the same varied prose (a seeded generator) with three facts
at different depths. Each fact's value appears once in the document. The outputs are committed.

``measure`` asks the three questions of each document with ``longread ask`` as a user would
(shipped defaults, ``--json``), and records per question: the answer, whether it is right,
the citations, whether a citation quotes the fact (precise), and whether its page or chapter is
the fact's. Run it on a quiet machine; it takes a few minutes per document.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

OUT = Path("results/citations/documents")
FACTS = [  # (page of 16 / chapter of 8, sentence, question, answer)
    (3, "The vault code of the Lisbon office is 58213.",
     "What is the vault code of the Lisbon office?", "58213"),
    (9, "The Oslo depot keeps its spare keys in locker 7741.",
     "In which locker does the Oslo depot keep its spare keys?", "7741"),
    (14, "The fleet manager of the Cairo branch is Amelia Ross.",
     "Who is the fleet manager of the Cairo branch?", "Amelia Ross"),
]  # fmt: skip
CHAPTER_OF_PAGE = 2  # pages per chapter in the e-book

SUBJECTS = [
    "The board",
    "The northern team",
    "Our drivers",
    "The audit group",
    "Each depot",
    "The planning office",
    "The night shift",
    "Most customers",
    "The new scheduler",
]
VERBS = [
    "reviewed",
    "reported",
    "questioned",
    "improved",
    "delayed",
    "welcomed",
    "measured",
    "discussed",
    "replaced",
]
OBJECTS = [
    "the route plans",
    "the winter timetable",
    "fuel use on long runs",
    "the older trucks",
    "loading times at the docks",
    "the tracking screens",
    "overtime in December",
    "the parcel scanners",
    "the safety checklist",
]
TAILS = ["after the spring review", "across the quarter", "without much fuss",
         "for the second year", "before the holidays", "as the contract asked", "in most regions",
         "at short notice"]  # fmt: skip


def prose(rng: random.Random, sentences: int) -> list[str]:
    return [
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}."
        for _ in range(sentences)
    ]


def pages(seed: int = 27) -> list[tuple[str, list[str]]]:
    """16 pages: a heading and paragraphs of prose each, a fact inside its page's prose."""
    rng = random.Random(seed)
    facts = {page: sentence for page, sentence, _, _ in FACTS}
    out = []
    for page in range(1, 17):
        paragraphs = [" ".join(prose(rng, 6)) for _ in range(4)]
        if page in facts:
            paragraphs[2] = paragraphs[2].replace(". ", f". {facts[page]} ", 1)
        out.append((f"{page}. Regional notes, part {page}", paragraphs))
    return out


def make() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    fixtures = _fixture_script()
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("chromium is not installed (apt-get install chromium)")
    body = "".join(
        f'<section style="break-before: page"><h2>{title}</h2>'
        + "".join(f"<p>{p}</p>" for p in paragraphs)
        + "</section>"
        for title, paragraphs in pages()
    )
    html = f"<!doctype html><html><head><meta charset='utf-8'></head><body>{body}</body></html>"
    fixtures.print_to_pdf(chromium, html, OUT / "report-16pages.pdf")
    _make_epub(OUT / "book-8chapters.epub")
    print(f"wrote {OUT}/report-16pages.pdf and {OUT}/book-8chapters.epub")


def _make_epub(out: Path) -> None:
    """Eight chapters of two pages each."""
    all_pages = pages()
    chapters = []
    for number in range(1, 9):
        pair = all_pages[(number - 1) * CHAPTER_OF_PAGE : number * CHAPTER_OF_PAGE]
        body = "".join(f"<p>{p}</p>" for _, paragraphs in pair for p in paragraphs)
        chapters.append((f"Chapter {number}: the year in the regions", body))
    _fixture_script().write_epub(out, "longread-citations-book", "Regional notes", chapters)


def _fixture_script():  # a module loaded from its path
    spec = importlib.util.spec_from_file_location(
        "make_document_fixtures", Path(__file__).with_name("make_document_fixtures.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(flags: list[str]) -> None:
    rows = []
    for name, where in (("report-16pages.pdf", "page"), ("book-8chapters.epub", "section")):
        command = [".venv/bin/longread", "ask", str(OUT / name), "--json", *flags]
        for _, _, question, _ in FACTS:
            command += ["-q", question]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        for (page, fact, question, gold), answer in zip(FACTS, answers, strict=True):
            expected = page if where == "page" else _chapter_title(page)
            citations = answer["citations"]
            rows.append({
                "flags": " ".join(flags),
                "document": name,
                "question": question,
                "answer": answer["answer"],
                "correct": gold.lower() in answer["answer"].lower(),
                "supported": answer["supported"],
                "citations": len(citations),
                "precise": sum(fact in c["quote"] for c in citations),
                "placed": sum(c[where] == expected for c in citations),
                "where": [c[where] for c in citations],
                "seconds": answer["seconds"],
            })  # fmt: skip
            print(json.dumps(rows[-1]))
    with open(OUT / "documents.jsonl", "a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)


def _chapter_title(page: int) -> str:
    return f"Chapter {(page - 1) // CHAPTER_OF_PAGE + 1}: the year in the regions"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["make", "measure"])
    parser.add_argument("flags", nargs="*", help="measure: flags for longread ask")
    args = parser.parse_args()
    make() if args.action == "make" else measure(args.flags)
