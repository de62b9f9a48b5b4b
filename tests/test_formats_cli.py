"""``longread ask`` on PDF, HTML, EPUB and DOCX files, and every bad document refused with one
line and exit 2 before the server is asked anything (the real CLI against a real HTTP
server on 127.0.0.1)."""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from longread.cli import cli

from .fake_openai_server import COUNTED, FakeOpenAIServer, Reply, completion_body

DOCUMENTS = Path(__file__).parent / "data" / "documents"
CHAT = "/v1/chat/completions"


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        fake.always(
            CHAT, Reply(body=completion_body("noted \\boxed{58213}", prompt_tokens=COUNTED))
        )
        yield fake


def ask(server: FakeOpenAIServer, file: str | Path, *extra: str, input: bytes | None = None):
    args = ["ask", str(file), "-q", "What is the vault code of the Lisbon office?"]
    args += ["--base-url", f"{server.url}/v1", "--model", "m", "--retries", "0", *extra]
    return CliRunner().invoke(cli, args, input=input)


def prompts(server: FakeOpenAIServer) -> str:
    return "\n".join(r.body["messages"][0]["content"] for r in server.requests_to(CHAT))


def assert_refused(result, server: FakeOpenAIServer, message: str) -> None:
    """Exit 2, one line on stderr saying ``message``, no traceback, no request sent."""
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    assert result.stderr.startswith("longread: error: ")
    assert message in result.stderr
    assert server.requests == []  # refused before any model was asked


@pytest.mark.parametrize("fixture", ["report.pdf", "page.html", "book.epub", "memo.docx"])
def test_ask_reads_each_format_and_the_model_sees_its_text(server, fixture):
    result = ask(server, DOCUMENTS / fixture, "--chunk-tokens", "200")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "58213"
    seen = prompts(server)
    assert "The vault code of the Lisbon office is 58213." in seen
    assert "%PDF" not in seen and "<p>" not in seen and "word/document.xml" not in seen


def test_a_pdf_on_standard_input_is_read_as_a_pdf(server):
    result = ask(server, "-", input=(DOCUMENTS / "report.pdf").read_bytes())
    assert result.exit_code == 0, result.stderr
    assert "The vault code of the Lisbon office is 58213." in prompts(server)


def test_an_encrypted_pdf_is_refused(server, tmp_path):
    import pypdf  # the dev extra: makes test PDFs pypdfium2 cannot write

    writer = pypdf.PdfWriter(clone_from=DOCUMENTS / "report.pdf")
    writer.encrypt(user_password="secret")
    path = tmp_path / "report.pdf"
    writer.write(path)
    result = ask(server, path)
    assert_refused(result, server, f"{path} is encrypted: decrypt it first (e.g. qpdf --decrypt)")


def test_a_pdf_without_a_text_layer_is_refused(server):
    path = DOCUMENTS / "scanned.pdf"
    result = ask(server, path)
    assert_refused(result, server, f"{path} has no text layer: run OCR first (e.g. ocrmypdf)")


@pytest.mark.parametrize("damage", ["cut in half", "random bytes"])
def test_a_damaged_pdf_is_refused(server, tmp_path, damage):
    data = (DOCUMENTS / "report.pdf").read_bytes()
    data = data[: len(data) // 2] if damage == "cut in half" else b"%PDF-1.7\n" + os.urandom(4000)
    path = tmp_path / "report.pdf"
    path.write_bytes(data)
    assert_refused(
        ask(server, path), server, f"{path} is not a readable PDF (damaged or truncated)"
    )


def test_a_zip_that_is_neither_epub_nor_docx_is_refused(server, tmp_path):
    path = tmp_path / "book.epub"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("chapter.txt", "Once upon a time.")
    assert_refused(ask(server, path), server, f"{path} is a zip archive but not an EPUB or DOCX")


def test_a_truncated_docx_is_refused(server, tmp_path):
    data = (DOCUMENTS / "memo.docx").read_bytes()
    path = tmp_path / "memo.docx"
    path.write_bytes(data[: len(data) // 2])
    assert_refused(ask(server, path), server, f"{path} is a damaged or truncated zip archive")


def test_html_without_text_is_refused(server, tmp_path):
    path = tmp_path / "page.html"
    path.write_text(
        "<!doctype html><html><head><title>T</title><script>x()</script></head>"
        "<body><nav>Home</nav><img src=a.png></body></html>"
    )
    assert_refused(ask(server, path), server, f"{path} holds no text")


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_a_document_over_max_document_mb_is_refused_from_its_size(server, tmp_path, source):
    path = tmp_path / "big.txt"
    path.write_text("The value is 7. " * 20000)  # 320,000 bytes
    if source == "file":
        result = ask(server, path, "--max-document-mb", "0.25")
        message = f"{path} is 0.3 MB, more than --max-document-mb 0.25"
    else:
        result = ask(server, "-", "--max-document-mb", "0.25", input=path.read_bytes())
        message = "stdin is over 0.3 MB, more than --max-document-mb 0.25"
    assert_refused(result, server, message)


def test_without_the_docs_extra_a_pdf_gets_the_install_line(server, monkeypatch):
    monkeypatch.setitem(sys.modules, "pypdfium2", None)  # what a missing package looks like
    result = ask(server, DOCUMENTS / "report.pdf")
    assert_refused(
        result, server, "reading PDF files needs the docs extra: pip install 'longread[docs]'"
    )
