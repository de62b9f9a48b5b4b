"""Where a request's document and question come from (``longread.serve.documents``)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from longread.serve.documents import extract, file_at
from longread.serve.errors import APIError
from longread.text.formats import document_from_bytes
from longread.text.positions import Position

DOCUMENTS = Path(__file__).parent / "data" / "documents"

LIMIT = 10_000


def user(content):
    return {"role": "user", "content": content}


def test_every_earlier_message_whatever_its_role_is_the_document_in_order():
    found = extract(
        [
            {"role": "system", "content": "Chapter one."},
            user("Chapter two."),
            {"role": "assistant", "content": "Chapter three."},
            user("  How many chapters?  "),
        ],
        None,
        LIMIT,
    )
    assert found.document == "Chapter one.\n\nChapter two.\n\nChapter three."
    assert found.question == "How many chapters?"
    assert (found.split.source, found.split.parts) == ("messages", 3)


def test_file_parts_from_earlier_turns_stay_the_document_of_a_follow_up_question():
    found = extract(
        [
            user([{"type": "file", "file": {"file_data": "The report.", "filename": "r.txt"}},
                  {"type": "text", "text": "Who wrote it?"}]),
            {"role": "assistant", "content": "Ann."},
            user("When?"),
        ],
        None,
        LIMIT,
    )  # fmt: skip
    assert (found.document, found.question) == ("The report.", "When?")
    assert found.split.names == ("r.txt",)


def test_data_urls_may_be_base64_or_percent_encoded_and_bad_bytes_are_replaced():
    encoded = base64.b64encode("caf\u00e9 \xff".encode("latin-1")).decode()
    for data, text in (
        (f"data:text/plain;base64,{encoded}", "caf\ufffd \ufffd"),
        ("data:text/plain,hello%20world", "hello world"),
    ):
        part = {"type": "file", "file": {"file_data": data}}
        found = extract([user([part, {"type": "text", "text": "Q?"}])], None, LIMIT)
        assert found.document == text
        assert found.split.names == ("file 1",)


def test_the_document_limit_counts_utf8_bytes():
    found = extract([user("\u00e9" * 50), user("Q?")], None, 100)
    assert found.split.document_bytes == 100
    with pytest.raises(APIError) as caught:
        extract([user("\u00e9" * 51), user("Q?")], None, 100)
    assert (caught.value.status, caught.value.code) == (413, "document_too_large")


@pytest.mark.parametrize(
    ("messages", "words"),
    [
        ([user("A document."), {"role": "assistant", "content": "An answer."}], "role user"),
        ([user("A document."), user("   ")], "no question"),
        ([user("   "), user("Q?")], "no document"),
        ([{"role": "system", "content": "Be brief."}, user("Q?")], None),  # a document of one
    ],
)
def test_what_cannot_be_split_is_refused(messages, words):
    if words is None:
        assert extract(messages, None, LIMIT).document == "Be brief."
        return
    with pytest.raises(APIError) as caught:
        extract(messages, None, LIMIT)
    assert caught.value.status == 400
    assert words in caught.value.message


def test_the_extension_document_wins_over_messages_and_is_said_to():
    found = extract([user("Earlier chat."), user("Q?")], "The real document.", LIMIT)
    assert (found.document, found.split.source) == ("The real document.", "longread.document")


def test_files_of_any_format_join_into_one_text_with_their_pages_and_sections_shifted():
    html, pdf = (DOCUMENTS / "page.html").read_bytes(), (DOCUMENTS / "report.pdf").read_bytes()
    parts = [
        {"type": "file", "file": {"file_data": html.decode(), "filename": "page.html"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,"
                                  + base64.b64encode(pdf).decode(), "filename": "report.pdf"}},
        {"type": "text", "text": "Q?"},
    ]  # fmt: skip
    found = extract([user(parts)], None, 10**6)
    first, second = found.files
    html_text, _, _ = document_from_bytes(html, name="page.html")
    pdf_text, _, _ = document_from_bytes(pdf, name="report.pdf")
    assert found.document == html_text + "\n\n" + pdf_text
    assert found.document[first.start : first.end] == html_text
    assert found.document[second.start : second.end] == pdf_text
    assert (first.name, first.format, second.name, second.format) == (
        "page.html", "html", "report.pdf", "pdf",
    )  # fmt: skip
    vault = "The vault code"
    assert found.positions.at(html_text.index(vault)) == Position(None, "Lisbon")
    in_pdf = second.start + pdf_text.index(vault)
    assert found.positions.at(in_pdf) == Position(2, "2. Offices and security")
    assert file_at(found.files, in_pdf) == second
    assert file_at(found.files, 0) == first
    assert found.split.names == ("page.html", "report.pdf")


def test_text_sent_as_longread_document_or_messages_has_no_positions_nor_files():
    for found in (
        extract([user("Q?")], "# Heading\n\nText.", LIMIT),
        extract([user("# Heading\n\nText."), user("Q?")], None, LIMIT),
    ):
        assert (len(found.positions), found.files) == (0, ())
