"""The embedded model's vocabulary as a Hugging Face ``tokenizers`` tokenizer: the same token
ids as llama.cpp's, counted many times faster (Rust, in parallel over a batch of paragraphs).

The vocabulary and merges are read from the GGUF file's metadata (a small reader here: the
``gguf`` package parses every tensor too, 20 s for SmolLM2), the tokenizer is built once and
cached as a tokenizer.json beside the converted models. Only vocabularies whose pre-tokenizer
we can rebuild are supported (``PRE_TOKENIZERS``), and every load is checked against llama.cpp
on probe texts: on any difference the caller keeps llama.cpp's tokenizer.
"""

from __future__ import annotations

import logging
import mmap
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..paths import cache_dir
from .tokenizers import HFTokenizer, LlamaCppTokenizer

log = logging.getLogger(__name__)

# llama.cpp's pre-tokenizer names (tokenizer.ggml.pre) that tokenizers can rebuild exactly.
PRE_TOKENIZERS = ("smollm",)
# Texts both tokenizers must agree on before the fast one is used: prose, numbers (SmolLM2
# splits digits), whitespace runs, code, non-Latin scripts, emoji, chat markers as plain text.
PROBES = (
    "The special magic number is 4720519. The grass is green.\n\nThe sky is blue.",
    "Hello  world\n\n\tTabs   and   spaces 12345 3.14159 -42 1,000,000 2026-11-23",
    "def f(x):\n    return x**2  # comment\r\n\n\n\n   leading and trailing   ",
    "ünïcödé naïve café 日本語のテキスト Ελληνικά русский عربى 😀🎉 👩\u200d👩\u200d👧",
    "It's we're they'll I'M DON'T <|im_start|>user hi<|im_end|> </s> [INST]",
    "Ⅻ ½ ² ١٢٣ ๓ zero\u200bwidth " + "x" * 300,
)
_GGUF_MAGIC = b"GGUF"
# GGUF metadata value types: struct formats of the fixed-size ones; 8 = string, 9 = array.
_SCALARS = dict(zip((0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12), "BbHhIif?Qqd", strict=True))
_STRING, _ARRAY = 8, 9


def fast_tokenizer(gguf: str | Path, reference: LlamaCppTokenizer) -> HFTokenizer | None:
    """The fast equivalent of ``reference`` (the tokenizer of the GGUF file ``gguf``), from the
    cache or built once; None when its vocabulary is not supported or the two disagree."""
    import tokenizers

    path = Path(gguf)
    cached = cache_dir() / "tokenizers" / f"{path.stem}.{path.stat().st_size}.tokenizer.json"
    if cached.is_file():
        candidate = HFTokenizer(tokenizers.Tokenizer.from_file(str(cached)), f"hf:{path.name}")
    else:
        built = build_tokenizer(read_vocabulary(path))
        if built is None:
            return None
        candidate = HFTokenizer(built, f"hf:{path.name}")
    if not agrees(candidate, reference):
        log.warning("the fast tokenizer of %s differs from llama.cpp's; using llama.cpp", path.name)
        return None
    if not cached.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(".partial")
        candidate.save(partial)
        partial.replace(cached)  # atomic: a concurrent reader never sees half a file
    return candidate


def agrees(candidate: HFTokenizer, reference: LlamaCppTokenizer) -> bool:
    """Whether both give the same ids for every probe text."""
    return all(candidate.encode(text) == reference.encode(text) for text in PROBES)


def build_tokenizer(vocabulary: dict[str, Any]) -> Any | None:
    """A ``tokenizers.Tokenizer`` for a GGUF vocabulary (``read_vocabulary``), or None when its
    model or pre-tokenizer is one this module cannot rebuild."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    if vocabulary.get("tokenizer.ggml.model") != "gpt2":
        return None
    if vocabulary.get("tokenizer.ggml.pre") not in PRE_TOKENIZERS:
        return None
    tokens: list[str] = vocabulary["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in vocabulary["tokenizer.ggml.merges"]]
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges)
    tokenizer = Tokenizer(bpe)
    # smollm: every digit alone, then GPT-2's byte-level split (llama.cpp's LLAMA_VOCAB_PRE_TYPE
    # _SMOLLM); control tokens stay plain text, as longread tokenizes with special=False.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def read_vocabulary(path: Path) -> dict[str, Any]:
    """The ``tokenizer.*`` metadata of the GGUF file at ``path`` (v2 or v3)."""
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        reader = _Reader(data)
        if reader.raw(4) != _GGUF_MAGIC:
            raise ValueError(f"{path} is not a GGUF file")
        version = reader.scalar("I")
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is too old")
        reader.scalar("Q")  # tensor count
        found: dict[str, Any] = {}
        for _ in range(reader.scalar("Q")):
            key = reader.string()
            value = reader.value(reader.scalar("I"))
            if key.startswith("tokenizer."):
                found[key] = value
        return found


class _Reader:
    """Little-endian GGUF values from a buffer, in order."""

    def __init__(self, data: mmap.mmap) -> None:
        self.data = data
        self.at = 0

    def raw(self, size: int) -> bytes:
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk

    def scalar(self, fmt: str) -> Any:
        (value,) = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        return self.raw(self.scalar("Q")).decode("utf-8")

    def value(self, kind: int) -> Any:
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, count = self.scalar("I"), self.scalar("Q")
            return self._array(item, count)
        if kind not in _SCALARS:
            raise ValueError(f"unknown GGUF value type {kind}")
        return self.scalar(_SCALARS[kind])

    def _array(self, item: int, count: int) -> list[Any]:
        if item in _SCALARS:  # one unpack for the whole array: token types are 49K values
            fmt = f"<{count}{_SCALARS[item]}"
            values = list(struct.unpack_from(fmt, self.data, self.at))
            self.at += struct.calcsize(fmt)
            return values
        read: Callable[[], Any] = self.string if item == _STRING else lambda: self.value(item)
        return [read() for _ in range(count)]
