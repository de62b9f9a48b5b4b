"""Implementations of the ``Tokenizer`` protocol, from most to least exact.

- ``HFTokenizer``: a Hugging Face ``tokenizer.json`` (a file or a model folder).
- ``LlamaCppTokenizer``: the vocabulary inside a GGUF file, through llama-cpp-python.
- ``ServerTokenizer``: the tokenize endpoint of a vLLM, SGLang or llama.cpp server.
- ``ApproxTokenizer``: a characters-per-token estimate for when none of the above exists.

Each has ``exact`` telling whether its counts are the model's own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from ..errors import BackendError, UsageError

if TYPE_CHECKING:
    import llama_cpp
    import tokenizers


class HFTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer; ``encode`` adds no special tokens."""

    exact = True

    def __init__(self, tokenizer: tokenizers.Tokenizer, name: str = "hf") -> None:
        self._tokenizer = tokenizer
        self.name = name

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
        encoded = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        return [len(e.ids) for e in encoded]

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids`` (not part of the protocol; for inspection and tests)."""
        return self._tokenizer.decode(ids, skip_special_tokens=False)

    def save(self, path: str | Path) -> None:
        """Write the tokenizer as a tokenizer.json file at ``path``."""
        self._tokenizer.save(str(path))


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


@dataclass(frozen=True)
class _Style:
    """One server family's tokenize request."""

    name: str
    path: str
    body: Callable[[str, str | None], dict[str, Any]]


def _without_none(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


_STYLES = (
    # vLLM and SGLang add BOS by default; we ask them not to.
    _Style(
        "vllm",
        "/tokenize",
        lambda text, model: _without_none(model=model, prompt=text, add_special_tokens=False),
    ),
    # llama.cpp's server answers {"tokens": []} to a body without "content", so a probe must
    # see a non-empty answer before it trusts a style.
    _Style("llama.cpp", "/tokenize", lambda text, model: {"content": text, "add_special": False}),
    # llama-cpp-python always adds BOS here; probe() learns to strip it.
    _Style(
        "llama-cpp-python",
        "/extras/tokenize",
        lambda text, model: _without_none(input=text, model=model),
    ),
)
_PROBE_TEXT = "Hello world, how are you?"
# What a tokenize request can fail with: transport and HTTP status errors, a malformed base URL,
# an answer that is not JSON or holds no token ids.
_FAILURES = (httpx.HTTPError, httpx.InvalidURL, ValueError)


class ServerTokenizer:
    """Token ids from a running server's tokenize endpoint (synchronous HTTP).

    ``base_url`` may end in ``/v1``; the tokenize endpoints live at the server's root. Build one
    with ``probe`` to find out which request style the server speaks; a tokenizer built directly
    probes on first use.
    """

    exact = True

    def __init__(self, base_url: str, model: str | None = None, timeout: float = 30.0) -> None:
        self.root = _server_root(base_url)
        self.model = model
        self.name = f"server:{self.root}" + (f" ({model})" if model else "")
        self._client = httpx.Client(timeout=timeout)
        self._style: _Style | None = None
        # Special tokens the server adds even to an empty text (e.g. BOS), learnt by probing.
        self._head: list[int] = []
        self._tail: list[int] = []

    @classmethod
    def probe(
        cls, base_url: str, model: str | None = None, timeout: float = 30.0
    ) -> ServerTokenizer | None:
        """A tokenizer for the server at ``base_url``, or None when no known endpoint answers."""
        tokenizer = cls(base_url, model, timeout)
        if tokenizer._detect():
            return tokenizer
        tokenizer.close()
        return None

    @property
    def style(self) -> str | None:
        """Which server family answered the probe ("vllm", "llama.cpp", "llama-cpp-python")."""
        return self._style.name if self._style else None

    def encode(self, text: str) -> list[int]:
        if self._style is None and not self._detect():
            raise BackendError(
                f"{self.root} has no tokenize endpoint (tried /tokenize and /extras/tokenize)"
            )
        assert self._style is not None
        try:
            ids = self._request(self._style, text)
        except _FAILURES as error:
            raise BackendError(
                f"tokenize request to {self.root} failed: {error}", transient=_transient(error)
            ) from None
        return self._strip(ids)

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> ServerTokenizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _detect(self) -> bool:
        """Try each style in turn; remember the first that tokenises a probe text."""
        for style in _STYLES:
            try:
                probe_ids = self._request(style, _PROBE_TEXT)
            except _FAILURES:
                continue
            if probe_ids:
                self._style = style
                self._learn_specials(probe_ids)
                return True
        return False

    def _learn_specials(self, probe_ids: list[int]) -> None:
        # Whatever an empty text turns into is special tokens; see where they sit in the probe.
        assert self._style is not None
        try:
            specials = self._request(self._style, "")
        except _FAILURES:
            specials = []  # some servers refuse an empty prompt; they add nothing either
        head = 0
        while head < len(specials) and head < len(probe_ids) and specials[head] == probe_ids[head]:
            head += 1
        tail = specials[head:]
        if tail and probe_ids[-len(tail) :] != tail:
            tail = []  # not where we expected: keep the ids rather than strip real tokens
        self._head, self._tail = specials[:head], tail

    def _strip(self, ids: list[int]) -> list[int]:
        if self._head and ids[: len(self._head)] == self._head:
            ids = ids[len(self._head) :]
        if self._tail and ids[-len(self._tail) :] == self._tail:
            ids = ids[: -len(self._tail)]
        return ids

    def _request(self, style: _Style, text: str) -> list[int]:
        """POST one tokenize request; ValueError when the answer is not a list of token ids."""
        response = self._client.post(self.root + style.path, json=style.body(text, self.model))
        response.raise_for_status()
        payload = response.json()
        tokens = payload.get("tokens") if isinstance(payload, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ValueError(f"unexpected tokenize answer from {style.path}")
        return tokens


def _transient(error: Exception) -> bool:
    """Server trouble (a lost connection, a timeout, 5xx, 408, 429) rather than a request the
    server will always refuse."""
    if isinstance(error, httpx.TransportError):
        return True
    if isinstance(error, httpx.HTTPStatusError):
        status = error.response.status_code
        return status >= 500 or status in (408, 429)
    return False


def _server_root(base_url: str) -> str:
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


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
