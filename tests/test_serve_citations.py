"""``longread serve`` reads real documents (PDF, HTML, EPUB, DOCX, Markdown, text) sent as file
parts and answers with citations: the ``longread`` field's ``citations`` (page, section, file)
and OpenAI ``url_citation`` annotations, checked with the official openai client against a
real server. The test-double model copies the sentence holding the fact into its notes; the
agents' own alignment (longread.citations) finds where it came from."""

from __future__ import annotations

import base64
import io
import json
import zipfile
from pathlib import Path

import pytest
from openai import BadRequestError, OpenAI

from longread.text.formats import document_from_bytes
from longread.trace import Run

from .serve_helpers import VAULT_QUESTION, client, curl, vault_reader

DOCUMENTS = Path(__file__).parent / "data" / "documents"
CODE = "58213"
FACT = "The vault code of the Lisbon office is 58213."
MARKDOWN = (
    "# Offices\n\nNorthwind has three offices.\n\n## Porto\n\nThe Porto office is small.\n\n"
    f"## Lisbon\n\nThe Lisbon office is the head office. {FACT}\n\n## Faro\n\nFaro is new.\n"
)
MIME = {
    ".pdf": "application/pdf",
    ".html": "text/html",
    ".epub": "application/epub+zip",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".md": "text/markdown",
}


def file_part(name: str, data: bytes) -> dict:
    url = (
        f"data:{MIME.get(Path(name).suffix, 'text/plain')};base64,{base64.b64encode(data).decode()}"
    )
    return {"type": "file", "file": {"file_data": url, "filename": name}}


def ask(api: OpenAI, *parts: dict, **kwargs):
    content = [*parts, {"type": "text", "text": VAULT_QUESTION}]
    return api.chat.completions.with_raw_response.create(
        model="longread-memagent", messages=[{"role": "user", "content": content}], **kwargs
    )


def test_a_pdf_sent_as_base64_comes_back_cited_with_its_page(start):
    server = start(vault_reader())
    data = (DOCUMENTS / "report.pdf").read_bytes()
    raw = ask(client(server), file_part("report.pdf", data))
    reply = raw.parse()
    message = reply.choices[0].message
    assert message.content == CODE
    info = reply.model_extra["longread"]
    assert info["supported"] is True
    (cited,) = info["citations"]
    assert FACT in cited["quote"]
    assert (cited["page"], cited["section"], cited["file"]) == (
        2,
        "2. Offices and security",
        "report.pdf",
    )
    # The offsets are the PDF's text layer, as the reader extracted it.
    text, _, _ = document_from_bytes(data, name="report.pdf")
    assert text[cited["char_start"] : cited["char_end"]] == cited["quote"]
    # The openai client parses the annotations as its own url_citation type.
    (annotation,) = message.annotations
    assert annotation.type == "url_citation"
    place = annotation.url_citation
    assert place.url == "file:report.pdf#page=2"
    assert place.title == "report.pdf, p. 2, 2. Offices and security"
    assert (place.start_index, place.end_index) == (0, len(CODE))
    # The trace keeps the located citation too, for the viewer.
    trace = Run.load(server.settings.runs_dir / f"{raw.headers['x-longread-run']}.json")
    assert [(c.page, c.quote) for c in trace.citations] == [(2, cited["quote"])]


@pytest.mark.parametrize(
    ("name", "section"),
    [
        ("page.html", "Lisbon"),
        ("memo.docx", "Lisbon"),
        ("book.epub", "Lisbon"),
        ("notes.md", "Lisbon"),
    ],
)
def test_html_docx_epub_and_markdown_are_cited_by_section_and_characters(start, name, section):
    server = start(vault_reader())
    data = MARKDOWN.encode() if name == "notes.md" else (DOCUMENTS / name).read_bytes()
    reply = ask(client(server), file_part(name, data)).parse()
    assert reply.choices[0].message.content == CODE
    (cited,) = reply.model_extra["longread"]["citations"]
    assert (cited["page"], cited["section"], cited["file"]) == (None, section, name)
    assert FACT in cited["quote"]
    (annotation,) = reply.choices[0].message.annotations
    url = annotation.url_citation.url
    assert url.startswith(f"file:{name}#char=")
    start_char, end_char = map(int, url.split("#char=")[1].split(","))
    text, _, _ = document_from_bytes(data, name=name)
    assert text[start_char:end_char] == cited["quote"]  # RFC 5147: offsets in that file's text
    assert annotation.url_citation.title == f"{name}, {section}"


def test_with_several_files_each_citation_names_its_file_and_points_into_it(start):
    server = start(vault_reader())
    memo = "Memo.\n\nThe canteen opens at nine. Nothing else happened this week."
    pdf = (DOCUMENTS / "report.pdf").read_bytes()
    reply = ask(
        client(server),
        file_part("memo.txt", memo.encode()),
        file_part("report.pdf", pdf),
    ).parse()
    info = reply.model_extra["longread"]
    assert info["split"]["names"] == ["memo.txt", "report.pdf"]
    (cited,) = info["citations"]
    assert (cited["file"], cited["page"]) == ("report.pdf", 2)
    # Offsets in the longread field count in the joined document: the memo, a blank line, the PDF.
    text, _, _ = document_from_bytes(pdf, name="report.pdf")
    shift = len(memo) + 2
    assert text[cited["char_start"] - shift : cited["char_end"] - shift] == cited["quote"]
    assert reply.choices[0].message.annotations[0].url_citation.url == "file:report.pdf#page=2"


def test_a_document_sent_as_text_is_cited_by_characters(start):
    server = start(vault_reader())
    document = MARKDOWN.replace("#", "")  # no file part: read as it is, no headings
    reply = client(server).chat.completions.create(
        model="longread-memagent",
        messages=[{"role": "user", "content": VAULT_QUESTION}],
        extra_body={"longread": {"document": document}},
    )
    (cited,) = reply.model_extra["longread"]["citations"]
    assert cited["file"] is None and cited["page"] is None
    assert document[cited["char_start"] : cited["char_end"]] == cited["quote"]
    (annotation,) = reply.choices[0].message.annotations
    assert (
        annotation.url_citation.url
        == f"file:document#char={cited['char_start']},{cited['char_end']}"
    )


def test_an_answer_nothing_backs_is_said_to_be_unsupported_with_no_annotation(start):
    server = start(vault_reader())
    memo = "The canteen opens at nine. Nothing else happened this week."
    reply = ask(client(server), file_part("memo.txt", memo.encode())).parse()
    assert reply.choices[0].message.content == "unknown"
    info = reply.model_extra["longread"]
    assert (info["supported"], info["citations"]) == (False, [])
    assert reply.choices[0].message.annotations is None


def test_a_stream_sends_the_citations_in_its_last_chunk(start):
    server = start(vault_reader())
    stream = client(server).chat.completions.create(
        model="longread-memagent",
        messages=[{"role": "user", "content": [
            file_part("report.pdf", (DOCUMENTS / "report.pdf").read_bytes()),
            {"type": "text", "text": VAULT_QUESTION},
        ]}],
        stream=True,
    )  # fmt: skip
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == CODE
    last = next(c for c in reversed(chunks) if c.choices and c.choices[0].finish_reason)
    info = last.model_extra["longread"]
    assert info["supported"] is True
    assert [(c["page"], c["file"]) for c in info["citations"]] == [(2, "report.pdf")]


def _encrypted_pdf() -> bytes:
    import pypdf  # the dev extra: makes test PDFs pypdfium2 cannot write

    writer = pypdf.PdfWriter(clone_from=DOCUMENTS / "report.pdf")
    writer.encrypt("sekrit")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _not_a_book() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("photos/one.txt", "not a book")
    return out.getvalue()


@pytest.mark.parametrize(
    ("name", "make", "words"),
    [
        ("scanned.pdf", lambda: (DOCUMENTS / "scanned.pdf").read_bytes(), "scanned.pdf"),
        ("locked.pdf", _encrypted_pdf, "locked.pdf"),
        ("broken.pdf", lambda: b"%PDF-1.7\n garbage", "broken.pdf"),
        ("archive.zip", _not_a_book, "archive.zip"),
    ],
)
def test_documents_that_hold_no_readable_text_are_refused_in_one_line(start, name, make, words):
    server = start(vault_reader())
    with pytest.raises(BadRequestError) as caught:
        ask(client(server), file_part(name, make()))
    error = caught.value.body
    assert error["code"] == "invalid_request"
    assert words in error["message"] and "\n" not in error["message"]
    assert "Traceback" not in error["message"]
    assert server.traces() == []  # nothing ran


def test_the_size_limit_holds_for_the_raw_file_before_it_is_read(start):
    data = (DOCUMENTS / "report.pdf").read_bytes()
    text, _, _ = document_from_bytes(data, name="report.pdf")
    server = start(vault_reader(), max_document_bytes=len(text.encode()) + 100)
    assert len(data) > server.settings.max_document_bytes  # the text would fit; the file not
    body = {
        "model": "longread-memagent",
        "messages": [{"role": "user", "content": [
            file_part("report.pdf", data), {"type": "text", "text": VAULT_QUESTION},
        ]}],
    }  # fmt: skip
    status, _, raw = curl(
        "-H", "Content-Type: application/json", server.base_url + "/chat/completions",
        data=json.dumps(body),
    )  # fmt: skip
    assert status == 413
    error = json.loads(raw)["error"]
    assert error["code"] == "document_too_large"
    assert f"report.pdf has {len(data)} bytes" in error["message"]
