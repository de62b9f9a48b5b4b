import io
import logging
import os
import random
import sys
import types

import pytest

from longread.errors import UsageError
from longread.text.reading import check_document, iter_paragraphs, read_document

from .text_helpers import document, paragraph

TEXT = "Zürich — naïve café. 日本語のテキスト。Emoji 🎉 too.\n\nSecond paragraph.\n"


def _read(path, **kwargs) -> str:
    return "".join(read_document(path, **kwargs))


# --- read_document ---------------------------------------------------------------------------


@pytest.mark.parametrize("block_bytes", [1, 3, 7, 1 << 20])
def test_multibyte_characters_survive_any_block_size(tmp_path, block_bytes):
    path = tmp_path / "doc.txt"
    path.write_text(TEXT, encoding="utf-8")
    warnings: list[str] = []
    pieces = list(read_document(path, warn=warnings.append, block_bytes=block_bytes))
    assert "".join(pieces) == TEXT
    assert warnings == []
    if block_bytes == 7:
        assert len(pieces) > 5  # streamed, not read whole


def test_utf8_bom_is_stripped(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + TEXT.encode())
    assert _read(path) == TEXT


def test_invalid_bytes_are_replaced_with_one_warning(tmp_path):
    path = tmp_path / "latin1.txt"
    # \xff and \xfe are never valid; \xe9 (latin-1 "é") starts a sequence that "bcd" does not
    # continue. A genuine U+FFFD in the file must not be counted as replaced.
    path.write_bytes(b"abc\xff\xfe def \xe9bcd \xef\xbf\xbd end" + b"\n" * 5)
    warnings: list[str] = []
    text = "".join(read_document(path, warn=warnings.append, block_bytes=4))
    assert text == "abc\ufffd\ufffd def \ufffdbcd \ufffd end\n\n\n\n\n"
    assert len(warnings) == 1
    assert warnings[0] == f"{path}: 3 bytes that are not valid UTF-8 were replaced with U+FFFD"


def test_default_warning_goes_to_logging(tmp_path, caplog):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok \x80\x80 ok")
    with caplog.at_level(logging.WARNING, logger="longread.text.reading"):
        assert _read(path) == "ok \ufffd\ufffd ok"
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: 2 bytes that are not valid UTF-8 were replaced with U+FFFD"
    ]


def test_truncated_sequence_at_end_of_file_is_replaced(tmp_path):
    path = tmp_path / "cut.txt"
    path.write_bytes("end ü".encode()[:-1])  # half of "ü"
    warnings: list[str] = []
    assert "".join(read_document(path, warn=warnings.append)) == "end \ufffd"
    assert "1 bytes" in warnings[0]


def test_binary_file_is_refused(tmp_path):
    path = tmp_path / "image.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
    with pytest.raises(UsageError) as caught:
        _read(path)
    assert str(caught.value) == f"{path} looks like a binary file (NUL bytes), not text"


def test_utf16_file_is_refused_with_advice(tmp_path):
    path = tmp_path / "utf16.txt"
    path.write_text("hello", encoding="utf-16")
    with pytest.raises(UsageError, match="UTF-16"):
        _read(path)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.txt"
    with pytest.raises(UsageError) as caught:
        _read(path)
    assert str(caught.value) == f"{path} does not exist"


def test_directory(tmp_path):
    with pytest.raises(UsageError, match="is a directory"):
        _read(tmp_path)


def test_unreadable_file(tmp_path, monkeypatch):
    path = tmp_path / "secret.txt"
    path.write_text("x")
    path.chmod(0)
    if os.geteuid() == 0:  # root reads anything: let open() refuse as it would for a user
        import longread.text.reading as reading

        def refuse(*args, **kwargs):
            raise PermissionError(13, "Permission denied", str(path))

        monkeypatch.setattr(reading, "open", refuse, raising=False)
    with pytest.raises(UsageError, match="permission denied"):
        _read(path)


@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf", b" \n\n\t \r\n"])
def test_empty_file(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    with pytest.raises(UsageError) as caught:
        _read(path)
    assert str(caught.value) == f"{path} is empty (no text to read)"
    with pytest.raises(UsageError) as caught:
        check_document(path)
    assert str(caught.value) == f"{path} is empty (no text to read)"


def test_checking_a_document_accepts_text_after_blank_lines(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_bytes(b"\n" * 10 + b"Words." + b"\xff" * 10)
    check_document(path)
    path.write_bytes(b"   ")
    with pytest.raises(UsageError, match=r"^a name is empty"):
        check_document(path, name="a name")


def test_dash_reads_stdin_buffer(monkeypatch):
    stdin = types.SimpleNamespace(buffer=io.BytesIO(TEXT.encode() + b"\xff"))
    monkeypatch.setattr(sys, "stdin", stdin)
    warnings: list[str] = []
    assert _read("-", warn=warnings.append) == TEXT + "\ufffd"
    assert warnings == ["stdin: 1 bytes that are not valid UTF-8 were replaced with U+FFFD"]
    assert not stdin.buffer.closed  # stdin is not ours to close


def test_empty_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO(b"")))
    with pytest.raises(UsageError, match="stdin is empty"):
        _read("-")


def test_file_is_closed_when_reading_stops_early(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text(TEXT * 100)
    pieces = read_document(path, block_bytes=16)
    next(pieces)
    frame = pieces.gi_frame
    stream = next(v for v in frame.f_locals.values() if isinstance(v, io.BufferedReader))
    pieces.close()
    assert stream.closed


# --- iter_paragraphs -------------------------------------------------------------------------


def _random_pieces(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    pieces, start = [], 0
    while start < len(text):
        end = start + rng.randint(1, 40)
        pieces.append(text[start:end])
        start = end
    return pieces


def test_paragraphs_keep_their_separators():
    text = "Title\n\nFirst para\nstill first.\n\n\n  \nSecond.\r\n\r\nThird\n"
    assert list(iter_paragraphs([text])) == [
        "Title\n\n",
        "First para\nstill first.\n\n\n  \n",
        "Second.\r\n\r\n",
        "Third\n",
    ]


@pytest.mark.parametrize("seed", range(5))
def test_paragraphs_do_not_depend_on_how_the_stream_is_cut(seed):
    text = "\n\n" + document(60, seed=seed) + "\n \n\n"
    expected = list(iter_paragraphs([text]))
    got = list(iter_paragraphs(_random_pieces(text, seed), max_chars=100_000))
    assert got == expected
    assert "".join(got) == text
    assert all(p.endswith("\n\n") for p in got[:-1])


def test_separator_split_across_pieces():
    pieces = ["one\n", "\n", "  \n", "two\n", "\n"]
    assert list(iter_paragraphs(pieces)) == ["one\n\n  \n", "two\n\n"]


def test_long_paragraph_is_cut_at_whitespace_within_the_cap():
    text = paragraph(random.Random(3), 400)  # one ~30k-character paragraph
    pieces = list(iter_paragraphs([text], max_chars=1000))
    assert "".join(pieces) == text
    assert len(pieces) > 20
    assert all(len(p) <= 1000 for p in pieces)
    # cut before a space, at a sentence end where the window holds one
    assert all(p.startswith(" ") for p in pieces[1:])
    assert sum(p.endswith((".", "!", "?", '"')) for p in pieces[:-1]) >= len(pieces) - 3


def test_long_paragraph_prefers_line_breaks():
    text = "\n".join(f"line {i} has some words" for i in range(500))
    pieces = list(iter_paragraphs(_random_pieces(text, 1), max_chars=1000))
    assert "".join(pieces) == text
    assert all(len(p) <= 1000 for p in pieces)
    assert all(p.startswith("\nline") for p in pieces[1:])


def test_text_without_whitespace_is_cut_hard():
    text = "x" * 10_000
    pieces = list(iter_paragraphs([text[:3000], text[3000:]], max_chars=1024))
    assert "".join(pieces) == text
    assert all(len(p) <= 1024 for p in pieces)


def test_tiny_max_chars_stays_lossless():
    text = "one\n\n  \ntwo three\n\nfour"
    for max_chars in (1, 2, 5):
        pieces = list(iter_paragraphs(_random_pieces(text, max_chars), max_chars=max_chars))
        assert "".join(pieces) == text
        assert all(0 < len(p) <= max_chars for p in pieces)


def test_no_pieces_no_paragraphs():
    assert list(iter_paragraphs([])) == []
    assert list(iter_paragraphs(["", ""])) == []
