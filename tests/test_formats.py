"""Document readers: each format's text, and page/section positions that point into exactly
the text the chunker cuts (real files: the committed fixtures, or files written here)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pypdfium2
import pytest

from longread.errors import UsageError
from longread.text import ApproxTokenizer, achunk_file
from longread.text.formats import document_from_bytes, open_document, sniff_format

DOCUMENTS = Path(__file__).parent / "data" / "documents"
FACT = "The vault code of the Lisbon office is 58213."


def read(path: Path | str, **options):
    """``(text, positions, format)`` of a whole document."""
    document = open_document(path, **options)
    text = "".join(document.pieces)
    return text, document.positions, document.format


def anchors(positions) -> list[dict]:
    return positions.to_list()


def pdf_page_texts(path: Path) -> list[str]:
    """Each page's text as PDFium gives it, read independently of the reader."""
    pdf = pypdfium2.PdfDocument(str(path))
    try:
        return [
            pdf[i].get_textpage().get_text_range().replace("\r\n", "\n") for i in range(len(pdf))
        ]
    finally:
        pdf.close()


def test_pdf_pages_are_anchored_where_their_text_starts():
    text, positions, fmt = read(DOCUMENTS / "report.pdf")
    assert fmt == "pdf"
    pages = pdf_page_texts(DOCUMENTS / "report.pdf")
    assert len(pages) == 3
    for number, page_text in enumerate(pages, 1):
        first = min(a["start"] for a in anchors(positions) if a["page"] == number)
        assert text[first:].startswith(page_text.strip()[:60])
        assert text[:first].endswith("\n\n") or first == 0  # pages never glue together


def test_pdf_fact_on_page_two_under_its_outline_heading():
    text, positions, _ = read(DOCUMENTS / "report.pdf")
    where = positions.at(text.index(FACT))
    assert where.page == 2
    assert where.section == "2. Offices and security"
    for anchor in anchors(positions):  # every section starts at its heading's text
        assert text[anchor["start"] :].startswith(anchor["section"])


@pytest.mark.parametrize(
    ("fixture", "fmt", "first_section"),
    [("page.html", "html", "Our offices"), ("book.epub", "epub", "The first depot")],
)
def test_html_and_epub_sections_start_at_their_headings(fixture, fmt, first_section):
    text, positions, got = read(DOCUMENTS / fixture)
    assert got == fmt
    assert positions.at(0).section == first_section
    assert positions.at(text.index(FACT)).section == "Lisbon"
    for anchor in anchors(positions):
        assert text[anchor["start"] :].startswith(anchor["section"])
        assert anchor["page"] is None


def test_html_drops_navigation_scripts_and_styles_and_keeps_paragraphs_apart():
    text, _, _ = read(DOCUMENTS / "page.html")
    for noise in (
        "Home",
        "Careers",
        "tracking code",
        "font-family",
        "enable JavaScript",
        'Northwind";',
    ):
        assert noise not in text
    assert "Northwind Logistics has offices in Porto, Lisbon and Faro.\n\nPorto\n\n" in text
    assert "Floor | Team" in text


def test_epub_reads_chapters_in_spine_order_without_its_table_of_contents():
    text, _, _ = read(DOCUMENTS / "book.epub")
    starts = [text.index(title) for title in ("The first depot", "Lisbon\n", "The south")]
    assert starts == sorted(starts)
    assert text.count("The first depot") == 1  # the nav page's list of chapters is not text


def test_docx_heading_styles_set_the_section_and_tables_are_read():
    text, positions, fmt = read(DOCUMENTS / "memo.docx")
    assert fmt == "docx"
    assert positions.at(0).section == "Memo: office security"  # the Title style
    assert positions.at(text.index(FACT)).section == "Lisbon"
    assert "Office | Keys\nLisbon | 2" in text
    for anchor in anchors(positions):
        assert text[anchor["start"] :].startswith(anchor["section"])


def test_markdown_text_is_kept_as_written_and_headings_outside_code_set_sections(tmp_path):
    source = (
        "Intro line.\n\n# Setup\n\nInstall it.\n\n```sh\n# not a heading\nmake\n```\n\n"
        "## Usage ##\r\nRun it. " + FACT + "\n"
    )
    path = tmp_path / "notes.md"
    path.write_bytes(source.encode())
    text, positions, fmt = read(path)
    assert (fmt, text) == ("markdown", source)  # CRLF and all
    assert [a["section"] for a in anchors(positions)] == ["Setup", "Usage"]
    assert text[anchors(positions)[1]["start"] :].startswith("## Usage")
    assert positions.at(text.index("# not a heading")).section == "Setup"
    assert positions.at(text.index(FACT)).section == "Usage"


def test_plain_text_is_read_as_is_without_positions(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("# Not markdown here\n\n" + FACT)
    text, positions, fmt = read(path)
    assert (fmt, text, len(positions)) == ("text", "# Not markdown here\n\n" + FACT, 0)


@pytest.mark.parametrize(
    ("head", "filename", "fmt"),
    [
        (b"%PDF-1.7\n...", "notes.txt", "pdf"),  # content beats the extension
        (b"\xef\xbb\xbf<!DOCTYPE html><p>x", "a.md", "html"),
        (b"<?xml version='1.0'?>\n<html xmlns='x'>", "a", "html"),
        (b"  <!-- c -->\n<BODY>hi", "a.txt", "html"),
        (b"<b>bold</b> text", "a.html", "html"),  # a fragment: the extension breaks the tie
        (b"<b>bold</b> text", "a.txt", "text"),
        (b"# Title\n\ntext", "README.md", "markdown"),
        (b"# Title\n\ntext", "notes.markdown", "markdown"),
        (b"# Title\n\ntext", "notes", "text"),
        (b"PK\x03\x04" + b"\0" * 26 + b"mimetypeapplication/epub+zip", "x.zip", "epub"),
        (b"PK\x03\x04" + b"\0" * 26 + b"word/document.xml", "x", "docx"),
        (b"PK\x03\x04" + b"\0" * 26 + b"[Content_Types].xml", "x.docx", "zip"),
    ],
)
def test_sniff_format_goes_by_content_first(head, filename, fmt):
    assert sniff_format(head, filename) == fmt


def test_a_docx_whose_head_does_not_say_is_found_by_looking_inside(tmp_path):
    # A DOCX saved by Word need not name word/document.xml in its first kilobytes.
    path = tmp_path / "renamed.bin"
    with zipfile.ZipFile(DOCUMENTS / "memo.docx") as source, zipfile.ZipFile(path, "w") as out:
        out.writestr("padding.xml", "x" * 20000, compress_type=zipfile.ZIP_STORED)
        for item in source.infolist():
            out.writestr(item, source.read(item))
    text, _, fmt = read(path)
    assert fmt == "docx" and FACT in text


def test_a_zip_that_is_neither_epub_nor_docx_is_refused(tmp_path):
    path = tmp_path / "photos.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a.txt", "hello " * 2000)
    with pytest.raises(UsageError, match="is a zip archive but not an EPUB or DOCX"):
        open_document(path)


def test_a_file_over_max_bytes_is_refused_before_reading(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("word " * 1000)
    with pytest.raises(UsageError, match="is 5,000 bytes, over the limit of 1,000 bytes"):
        open_document(path, max_bytes=1000)


def test_some_pages_without_text_are_skipped_with_one_warning(tmp_path):
    import pypdf  # the dev extra: makes test PDFs pypdfium2 cannot write

    writer = pypdf.PdfWriter(clone_from=DOCUMENTS / "report.pdf")
    writer.append(DOCUMENTS / "scanned.pdf")
    path = tmp_path / "mixed.pdf"
    writer.write(path)
    warnings: list[str] = []
    text, positions, _ = read(path, warn=warnings.append)
    assert FACT in text
    assert warnings == [f"{path}: 2 of 5 pages have no text layer (scanned?) and are skipped"]
    assert positions.at(len(text) - 1).page == 3


def test_document_from_bytes_gives_what_the_file_gives():
    data = (DOCUMENTS / "report.pdf").read_bytes()
    text, positions, fmt = document_from_bytes(data, name="upload.pdf")
    want_text, want_positions, _ = read(DOCUMENTS / "report.pdf")
    assert (text, fmt) == (want_text, "pdf")
    assert positions.to_list() == want_positions.to_list()


def test_positions_grow_as_the_pages_stream_out():
    document = open_document(DOCUMENTS / "report.pdf")
    first = next(document.pieces)
    assert FACT not in first and document.positions.has_pages
    assert {a["page"] for a in anchors(document.positions)} == {1}
    rest = "".join(document.pieces)
    assert {a["page"] for a in anchors(document.positions)} == {1, 2, 3}
    assert FACT in rest


@pytest.mark.parametrize("fixture", ["report.pdf", "page.html", "book.epub", "memo.docx"])
async def test_chunks_carry_the_documents_positions_and_format(fixture):
    chunks = await achunk_file(DOCUMENTS / fixture, ApproxTokenizer(), max_tokens=60)
    try:
        text, positions, fmt = read(DOCUMENTS / fixture)
        assert "".join(chunk.text for chunk in chunks) == text
        assert chunks.format == fmt
        assert chunks.positions.to_list() == positions.to_list()
        holding = next(c for c in chunks if "58213" in c.text)
        assert positions.at(holding.start + holding.text.index("58213")).section is not None
    finally:
        chunks.close()


@pytest.mark.parametrize(
    ("fixture", "module", "label"),
    [
        ("report.pdf", "pypdfium2", "PDF"),
        ("page.html", "selectolax.lexbor", "HTML"),
        ("book.epub", "ebooklib.epub", "EPUB"),
        ("memo.docx", "docx", "DOCX"),
    ],
)
def test_without_the_docs_extra_the_user_is_told_what_to_install(
    monkeypatch, fixture, module, label
):
    monkeypatch.setitem(sys.modules, module, None)  # what a missing package looks like
    with pytest.raises(UsageError) as caught:
        "".join(open_document(DOCUMENTS / fixture).pieces)
    assert str(caught.value) == (
        f"reading {label} files needs the docs extra: pip install 'longread[docs]'"
    )
