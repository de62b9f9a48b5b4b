"""Implementations of the ``Tokenizer`` protocol, from most to least exact.

- ``HFTokenizer``: a Hugging Face ``tokenizer.json`` (a file or a model folder).
- ``LlamaCppTokenizer``: the vocabulary inside a GGUF file, through llama-cpp-python.
- ``ServerTokenizer``: the tokenize endpoint of a vLLM, SGLang or llama.cpp server (its own
  module, ``_server_tokenizer``).
- ``ApproxTokenizer``: a characters-per-token estimate for when none of the above exists.

Each has ``exact`` telling whether its counts are the model's own. Those that count many texts
faster together than one by one have ``count_many``, which chunking uses for paragraphs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ._server_tokenizer import ServerTokenizer

__all__ = ["ApproxTokenizer", "HFTokenizer", "LlamaCppTokenizer", "ServerTokenizer"]

if TYPE_CHECKING:
    import llama_cpp
    import tokenizers


class HFTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer; ``encode`` adds no special tokens."""

    exact = True

    def __init__(self, tokenizer: tokenizers.Tokenizer, name: str = "hf") -> None:
        self._tokenizer = tokenizer
        self.name = name
        self._cuts: bool | None = None  # see cuts_between; learnt on first use

    @classmethod
    def from_path(cls, path: str | Path) -> HFTokenizer:
        """Load ``path``: a tokenizer.json file, or a model folder that contains one."""
        import tokenizers

        file = Path(path)
        if file.is_dir():
            file = file / "tokenizer.json"
        if not file.is_file():
            raise UsageError(f"no tokenizer found at {path} (expected a tokenizer.json file)")
        try:
            loaded = tokenizers.Tokenizer.from_file(str(file))
        except Exception as error:  # the library raises plain Exception on malformed files
            raise UsageError(f"{file} is not a valid tokenizer.json: {error}") from None
        return cls(loaded, name=f"hf:{file}")

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: list[str]) -> list[int]:
        """Token counts of ``texts``, encoded in parallel (the library's threads, without the
        GIL): chunking counts a document's paragraphs this way."""
        # encode_batch_fast (tokenizers >= 0.21) skips character offsets: the same ids, sooner.
        encode = getattr(self._tokenizer, "encode_batch_fast", self._tokenizer.encode_batch)
        return [len(e.ids) for e in encode(texts, add_special_tokens=False)]

    def cuts_between(self, left: str, right: str) -> bool:
        """Whether ``left + right`` provably tokenises as ``left`` and ``right`` apart (no token
        spans the join), so that its count is the sum of theirs: the chunker then adds counts
        up instead of counting a chunk again. Claimed only where ``left`` ends in a non-space
        and ``right`` starts with ASCII whitespace, for pipelines where that is a sure cut
        (``_cuts_before_space``)."""
        if not left or not right or left[-1].isspace() or right[0] not in _ASCII_SPACE:
            return False
        if self._cuts is None:
            self._cuts = _cuts_before_space(self._tokenizer)
        return self._cuts

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids`` (not part of the protocol; for inspection and tests)."""
        return self._tokenizer.decode(ids, skip_special_tokens=False)

    def save(self, path: str | Path) -> None:
        """Write the tokenizer as a tokenizer.json file at ``path``."""
        self._tokenizer.save(str(path))


# Characters that every regex engine's \\s matches (Python's str.isspace() is wider still).
_ASCII_SPACE = frozenset(" \t\n\r\x0b\x0c")
# GPT-2's byte-level pre-tokenizer regex never lets a piece run from a non-space into a space
# (its word, number and symbol pieces hold no space after their optional leading one, its
# space pieces nothing else), and none of its patterns looks behind: text that ends in a
# non-space is split the same whatever whitespace follows. Digits only splits off digits.
_CUTTING_STEPS = ("ByteLevel", "Digits")


def _cuts_before_space(tokenizer: tokenizers.Tokenizer) -> bool:
    """Whether ``tokenizer`` always cuts between a non-space and the whitespace after it, and
    tokenises each side as it would alone: a byte-level BPE with no normaliser, no prefix space
    added, no post-processor that changes ids, and no added token that could span or swallow
    the join (one containing whitespace, or stripping the whitespace to its right)."""
    from tokenizers import models

    model = tokenizer.model
    if not isinstance(model, models.BPE) or model.dropout or tokenizer.normalizer is not None:
        return False
    if tokenizer.post_processor is not None or tokenizer.pre_tokenizer is None:
        return False
    state = json.loads(tokenizer.pre_tokenizer.__getstate__())
    steps = state["pretokenizers"] if state.get("type") == "Sequence" else [state]
    if not all(step.get("type") in _CUTTING_STEPS for step in steps):
        return False
    byte_level = [step for step in steps if step["type"] == "ByteLevel"]
    if len(byte_level) != 1 or byte_level[0].get("add_prefix_space", True):
        return False
    if not byte_level[0].get("use_regex", True):
        return False
    added = tokenizer.get_added_tokens_decoder().values()
    return not any(t.rstrip or any(c.isspace() for c in t.content) for t in added)


class LlamaCppTokenizer:
    """The tokenizer of a ``llama_cpp.Llama`` model (or of a vocabulary-only load of one)."""

    exact = True

    def __init__(self, llama: llama_cpp.Llama, name: str | None = None) -> None:
        self._llama = llama
        self.name = name or f"llama.cpp:{Path(getattr(llama, 'model_path', 'model')).name}"

    @classmethod
    def from_gguf(cls, path: str | Path) -> LlamaCppTokenizer:
        """Load only the vocabulary of the GGUF file at ``path`` (fast, no weights)."""
        try:
            from llama_cpp import Llama
        except ImportError:
            raise UsageError(
                "reading a GGUF vocabulary needs llama-cpp-python: pip install 'longread[local]'"
            ) from None
        if not Path(path).is_file():
            raise UsageError(f"{path} does not exist (expected a .gguf model file)")
        try:
            llama = Llama(model_path=str(path), vocab_only=True, verbose=False)
        except ValueError as error:  # llama-cpp-python's report of a file it cannot load
            raise UsageError(f"cannot load the vocabulary of {path}: {error}") from None
        return cls(llama)

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        return list(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids`` (not part of the protocol; for inspection and tests)."""
        return self._llama.detokenize(ids).decode("utf-8", errors="replace")


class ApproxTokenizer:
    """An estimate, ``ceil(len(text) / chars_per_token)``, for when no exact tokenizer exists.

    ``encode`` returns that many dummy ids (zeros). Chunks cut with it may exceed the model's
    real budget; callers should say so.
    """

    exact = False

    def __init__(self, chars_per_token: float = 4.0) -> None:
        if chars_per_token <= 0:
            raise ValueError(f"chars_per_token must be positive, got {chars_per_token}")
        self.chars_per_token = chars_per_token
        self.name = f"approximate ({chars_per_token:g} characters per token)"

    def encode(self, text: str) -> list[int]:
        return [0] * self.count(text)

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)
