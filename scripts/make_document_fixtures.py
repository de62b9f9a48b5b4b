"""Make the document fixtures in tests/data/documents/ with real tools (issue 27).

    .venv/bin/python scripts/make_document_fixtures.py [--out tests/data/documents]

Needs Debian's chromium (``--headless --print-to-pdf``) and the ``docs`` extra (ebooklib,
python-docx). The outputs are committed, so the tests never run this; rerun it only to change a
fixture. Every fixture states the same fact, so one question serves a demo on each format:

    question: What is the vault code of the Lisbon office?      answer: 58213

report.pdf   3 pages, headings, the fact on page 2 (a cited answer shows "p. 2")
scanned.pdf  2 pages holding only drawn shapes: no text layer (the "run OCR first" refusal)
page.html    a web page with navigation, script and style noise around headings and the fact
book.epub    3 chapters, the fact in chapter 2
memo.docx    headings, a table, the fact under the second heading
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

FACT = "The vault code of the Lisbon office is 58213."
FILLER = (
    "Shipments through the northern corridor held steady across the quarter, and the teams "
    "that moved to the new scheduling system reported fewer missed pickups than the year "
    "before. Fuel costs rose slightly; the board asked for a review of the older trucks."
)

REPORT_SECTIONS = [
    ("1. Overview", "Northwind Logistics ran forty depots this year."),
    ("2. Offices and security", f"Each office keeps its own vault. {FACT} Two people hold it."),
    ("3. Outlook", "Next year the company expects to open two depots in the south."),
]


def report_html() -> str:
    """Three sections, each on its own page (a page break before sections 2 and 3)."""
    parts = []
    for number, (heading, lead) in enumerate(REPORT_SECTIONS):
        style = ' style="break-before: page"' if number else ""
        body = "".join(f"<p>{FILLER}</p>" for _ in range(4))
        parts.append(f"<section{style}><h2>{heading}</h2><p>{lead}</p>{body}</section>")
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Annual report</title></head>"
        "<body><h1>Northwind Logistics: annual report 2025</h1>" + "".join(parts) + "</body></html>"
    )


def scanned_html() -> str:
    """Pages with drawn boxes only, as a scan without OCR would be: no text anywhere."""
    box = (
        '<svg width="500" height="300"><rect x="10" y="10" width="480" height="280" '
        'fill="#ccd" stroke="#334"/><circle cx="250" cy="150" r="80" fill="#889"/></svg>'
    )
    page = '<div style="break-after: page">' + box + "</div>"
    return "<!doctype html><html><body>" + page + box + "</body></html>"


PAGE_HTML = f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Northwind Logistics: offices</title>
  <style>body {{ font-family: sans-serif; }} nav a {{ margin: 0 1em; }}</style>
  <script>window.analytics = {{ track: function () {{ return "tracking code 99999"; }} }};</script>
</head>
<body>
  <nav><a href="/">Home</a> <a href="/offices">Offices</a> <a href="/careers">Careers</a></nav>
  <main>
    <h1>Our offices</h1>
    <p>Northwind Logistics has offices in <b>Porto</b>, <i>Lisbon</i> and Faro.</p>
    <h2>Porto</h2>
    <p>The Porto office handles the northern corridor.</p>
    <ul><li>Opened in 2009</li><li>Twelve staff</li></ul>
    <h2>Lisbon</h2>
    <p>The Lisbon office is the head office. {FACT}</p>
    <table><tr><th>Floor</th><th>Team</th></tr><tr><td>1</td><td>Dispatch</td></tr></table>
    <h2>Faro</h2>
    <p>The Faro office opened last spring.</p>
  </main>
  <script>document.title += " | Northwind";</script>
  <noscript>Please enable JavaScript.</noscript>
</body>
</html>
"""


def print_to_pdf(chromium: str, html: str, out: Path) -> None:
    """``chromium --headless --print-to-pdf`` of ``html``, without date/URL headers."""
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "page.html"
        source.write_text(html, encoding="utf-8")
        command = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-pdf-header-footer",
            "--generate-pdf-document-outline",
            f"--user-data-dir={folder}/profile",
            f"--print-to-pdf={out}",
            source.as_uri(),
        ]
        subprocess.run(command, check=True, capture_output=True, timeout=120)


def write_epub(out: Path, identifier: str, title: str, chapters: list[tuple[str, str]]) -> None:
    """An EPUB of ``chapters`` (title, body HTML), each a spine item and a TOC entry."""
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier(identifier)
    book.set_title(title)
    book.set_language("en")
    items = []
    for number, (heading, body) in enumerate(chapters, 1):
        item = epub.EpubHtml(title=heading, file_name=f"chapter{number}.xhtml", lang="en")
        item.content = f"<h1>{heading}</h1>{body}"
        book.add_item(item)
        items.append(item)
    book.toc = items
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *items]
    epub.write_epub(str(out), book)


def make_epub(out: Path) -> None:
    texts = [
        ("The first depot", "The company began with one depot and three trucks."),
        ("Lisbon", f"The head office moved to Lisbon in 2012. {FACT}"),
        ("The south", "The southern depots opened one after another."),
    ]
    chapters = [(title, f"<p>{lead}</p><p>{FILLER}</p>") for title, lead in texts]
    write_epub(out, "longread-fixture-book", "The Northwind Years", chapters)


def make_docx(out: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Memo: office security", level=0)  # the "Title" style
    document.add_heading("Porto", level=1)
    document.add_paragraph("The Porto office changed its locks in March. " + FILLER)
    document.add_heading("Lisbon", level=1)
    document.add_paragraph(f"The Lisbon office keeps the company's vault. {FACT}")
    table = document.add_table(rows=2, cols=2)
    for row, cells in zip(table.rows, [("Office", "Keys"), ("Lisbon", "2")], strict=True):
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    document.add_heading("Faro", level=1)
    document.add_paragraph("The Faro office has no vault.")
    document.save(str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("tests/data/documents"))
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("Debian's chromium is needed: apt-get install chromium")
    print_to_pdf(chromium, report_html(), out / "report.pdf")
    print_to_pdf(chromium, scanned_html(), out / "scanned.pdf")
    (out / "page.html").write_text(PAGE_HTML, encoding="utf-8")
    make_epub(out / "book.epub")
    make_docx(out / "memo.docx")
    for path in sorted(out.iterdir()):
        print(f"{path}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
