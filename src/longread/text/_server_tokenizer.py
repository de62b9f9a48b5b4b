"""``ServerTokenizer``: token ids from the tokenize endpoint of a vLLM, SGLang or llama.cpp
server, many texts at a time.

A long document has tens of thousands of paragraphs; one blocking request each, at a round trip
of 20 ms, is minutes. ``count_many`` sends many texts per request where the server's dialect
allows it, exactly:

- SGLang takes a list of prompts and answers a list of id lists;
- llama.cpp's server takes a "content" list of texts and token ids, tokenises each text alone
  and keeps each id as it is: texts sent with a separator id between them come back as each
  text's own ids with that id between them (the split is trusted only when the separator
  occurs exactly as often as it was sent).

vLLM and llama-cpp-python take one text a request; they get ``concurrency`` requests at a time.
Requests go out from daemon threads: the calling thread only waits, and a caller that gives up
(Ctrl-C, a cancelled task) is never held up by a slow server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from ..errors import BackendError

T = TypeVar("T")
R = TypeVar("R")

# A request that fails on server trouble (a kept-alive connection the server dropped, a 5xx, a
# timeout) is sent again, after 0.25, 0.5, 1 and 2 s: chunking a book sends thousands of them,
# and one reset must not end the run.
RETRIES = 4

# Texts per request to a server that takes a list of prompts: few requests, each of a size
# (some 25K tokens of paragraphs) any server answers quickly.
BATCH_TEXTS = 128


@dataclass(frozen=True)
class _Style:
    """One server family's tokenize request. ``batches``: its body may carry a list of texts,
    answered with a list of id lists; ``mixed``: its body may carry a list of texts and token
    ids, answered with one id list in which each text is tokenised alone."""

    name: str
    path: str
    body: Callable[[str | Sequence[str | int], str | None], dict[str, Any]]
    batches: bool = False
    mixed: bool = False


def _without_none(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


_STYLES = (
    # vLLM and SGLang add BOS by default; we ask them not to. SGLang also takes a list of
    # prompts (and answers a list of id lists); vLLM refuses one, which the batch probe sees.
    _Style(
        "vllm",
        "/tokenize",
        lambda text, model: _without_none(model=model, prompt=text, add_special_tokens=False),
        batches=True,
    ),
    # llama.cpp's server answers {"tokens": []} to a body without "content", so a probe must
    # see a non-empty answer before it trusts a style. A list "content" is one prompt made of
    # pieces (its tokenize_mixed): each text tokenised alone, each integer kept as a token id.
    _Style(
        "llama.cpp",
        "/tokenize",
        lambda text, model: {"content": text, "add_special": False},
        mixed=True,
    ),
    # llama-cpp-python always adds BOS here; probe() learns to strip it.
    _Style(
        "llama-cpp-python",
        "/extras/tokenize",
        lambda text, model: _without_none(input=text, model=model),
    ),
)
_PROBE_TEXT = "Hello world, how are you?"
_PROBE_BATCH = [_PROBE_TEXT, "Two texts, one request: 42."]
# The separator between texts in a mixed request: the id of a control character (BEL) that
# documents hardly ever hold, so that a batch is rarely sent again one text at a time.
_SEPARATOR_TEXT = "\x07"
# What a tokenize request can fail with: transport and HTTP status errors, a malformed base URL,
# an answer that is not JSON or holds no token ids.
_FAILURES = (httpx.HTTPError, httpx.InvalidURL, ValueError)


class ServerTokenizer:
    """Token ids from a running server's tokenize endpoint (synchronous HTTP).

    ``base_url`` may end in ``/v1``; the tokenize endpoints live at the server's root. Build one
    with ``probe`` to find out which request style the server speaks; a tokenizer built directly
    probes on first use. ``count_many`` keeps up to ``concurrency`` requests in flight.
    """

    exact = True

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        timeout: float = 30.0,
        concurrency: int = 16,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.root = _server_root(base_url)
        self.model = model
        self.concurrency = concurrency
        self.name = f"server:{self.root}" + (f" ({model})" if model else "")
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self._client = httpx.Client(timeout=timeout, limits=limits)
        self._style: _Style | None = None
        # Special tokens the server adds even to an empty text (e.g. BOS), learnt by probing.
        self._head: list[int] = []
        self._tail: list[int] = []
        self._batches: bool | None = None  # whether a request may carry many texts; learnt
        self._separator: int | None = None  # the id between texts in a mixed request; learnt

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

    @property
    def batches(self) -> bool | None:
        """Whether the server tokenises many texts in one request (None: not yet asked)."""
        return self._batches

    def encode(self, text: str) -> list[int]:
        style = self._detected()
        if not text:
            return []  # no text, no tokens (and some servers refuse an empty prompt)
        return self._strip(self._call(self._request, style, text))

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        """``[encode(t) for t in texts]`` in fewer round trips: ``BATCH_TEXTS`` texts to a
        request where the server takes many (see the module docstring), else one text a
        request; either way ``concurrency`` requests in flight."""
        style = self._detected()
        if self._batches is None:
            self._batches = self._detect_batches(style)
        if not self._batches:
            return map_concurrently(self.encode, texts, self.concurrency)
        groups = [texts[at : at + BATCH_TEXTS] for at in range(0, len(texts), BATCH_TEXTS)]
        encoded = map_concurrently(self._encode_group, groups, self.concurrency)
        return [ids for group in encoded for ids in group]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """``[count(t) for t in texts]``, as ``encode_many`` fetches them; chunking counts a
        document's paragraphs this way."""
        return [len(ids) for ids in self.encode_many(texts)]

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> ServerTokenizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _detected(self) -> _Style:
        if self._style is None and not self._detect():
            raise BackendError(
                f"{self.root} has no tokenize endpoint (tried /tokenize and /extras/tokenize)"
            )
        assert self._style is not None
        return self._style

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

    def _detect_batches(self, style: _Style) -> bool:
        """Whether many texts in one request come back as what each gives alone: a list of
        texts (SGLang; vLLM refuses it), or texts between separator ids (llama.cpp)."""
        if style.mixed and not self._head and not self._tail:
            return self._detect_mixed(style)
        if not style.batches:
            return False
        try:  # a dropped connection is asked again: it says nothing about lists
            together = _retried(self._request_many, style, _PROBE_BATCH)
            alone = [_retried(self._request, style, text) for text in _PROBE_BATCH]
        except _FAILURES:
            return False
        return together == alone

    def _detect_mixed(self, style: _Style) -> bool:
        """Learn the separator id, then check that texts sent between separators come back as
        each text's own ids."""
        try:
            separator_ids = _retried(self._request, style, _SEPARATOR_TEXT)
            if not separator_ids:
                return False
            self._separator = separator_ids[-1]
            together = _retried(self._request_many, style, _PROBE_BATCH)
            alone = [_retried(self._request, style, text) for text in _PROBE_BATCH]
        except (*_FAILURES, _Ambiguous):
            return False
        return together == alone

    def _learn_specials(self, probe_ids: list[int]) -> None:
        # Whatever an empty text turns into is special tokens; see where they sit in the probe.
        assert self._style is not None
        try:
            specials = _retried(self._request, self._style, "")
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

    def _encode_group(self, texts: Sequence[str]) -> list[list[int]]:
        """One request for ``texts`` (empty ones are not sent: they have no tokens). A mixed
        answer that cannot be split for sure (a text holds the separator) is asked for again
        one text at a time."""
        assert self._style is not None
        sent = [text for text in texts if text]
        try:
            answers = iter(self._call(self._request_many, self._style, sent) if sent else [])
        except _Ambiguous:
            answers = iter([self.encode(text) for text in sent])
        return [self._strip(next(answers)) if text else [] for text in texts]

    def _call(self, request: Callable[[_Style, Any], R], style: _Style, texts: Any) -> R:
        """``request(style, texts)``, retried on server trouble; its failures as BackendError."""
        try:
            return _retried(request, style, texts)
        except _FAILURES as error:
            raise BackendError(
                f"tokenize request to {self.root} failed: {error}", transient=_transient(error)
            ) from None

    def _post(self, style: _Style, texts: str | Sequence[str | int]) -> Any:
        response = self._client.post(self.root + style.path, json=style.body(texts, self.model))
        response.raise_for_status()
        payload = response.json()
        return payload.get("tokens") if isinstance(payload, dict) else None

    def _request(self, style: _Style, text: str) -> list[int]:
        """POST one tokenize request; ValueError when the answer is not a list of token ids."""
        tokens = self._post(style, text)
        if not _is_ids(tokens):
            raise ValueError(f"unexpected tokenize answer from {style.path}")
        return tokens

    def _request_many(self, style: _Style, texts: list[str]) -> list[list[int]]:
        """POST one tokenize request for a list of texts; ValueError unless the answer is one
        list of token ids per text."""
        if style.mixed:
            return self._request_mixed(style, texts)
        tokens = self._post(style, texts)
        if not isinstance(tokens, list) or len(tokens) != len(texts):
            raise ValueError(f"unexpected answer to a batch from {style.path}")
        if not all(_is_ids(ids) for ids in tokens):
            raise ValueError(f"unexpected answer to a batch from {style.path}")
        return tokens

    def _request_mixed(self, style: _Style, texts: list[str]) -> list[list[int]]:
        """POST ``texts`` with the separator id between them; split the answer at it.
        ``_Ambiguous`` when the separator comes back more often than it was sent."""
        assert self._separator is not None
        separator = self._separator
        content: list[str | int] = [texts[0]]
        for text in texts[1:]:
            content += [separator, text]
        tokens = self._post(style, content)
        if not _is_ids(tokens):
            raise ValueError(f"unexpected answer to a batch from {style.path}")
        return _split_at(tokens, separator, len(texts))


class _Ambiguous(Exception):
    """A mixed answer holds the separator id more often than it was sent: a text turned into
    it too, so where one text ends is not known."""


def _split_at(tokens: list[int], separator: int, parts: int) -> list[list[int]]:
    """``tokens`` cut at each ``separator`` into ``parts`` lists; ``_Ambiguous`` unless the
    separator occurs exactly ``parts - 1`` times (then no text produced it, and each cut is
    where a separator was sent)."""
    if tokens.count(separator) != parts - 1:
        raise _Ambiguous
    pieces: list[list[int]] = [[]]
    for token in tokens:
        if token == separator:
            pieces.append([])
        else:
            pieces[-1].append(token)
    return pieces


def _retried(request: Callable[[_Style, Any], R], style: _Style, texts: Any) -> R:
    """``request(style, texts)``, sent again (``RETRIES`` times at most) while it fails on
    server trouble; any other failure, or the last, is raised as it came."""
    retrying = Retrying(
        stop=stop_after_attempt(RETRIES + 1),
        wait=wait_exponential(multiplier=0.25, max=2),
        retry=retry_if_exception(_transient),
        reraise=True,
    )
    return retrying(request, style, texts)


def map_concurrently(work: Callable[[T], R], items: Sequence[T], limit: int) -> list[R]:
    """``[work(item) for item in items]`` with up to ``limit`` calls in flight; the first
    exception any call raises is raised here once the calls in flight have ended.

    The calls run on daemon threads: the interpreter waits for a ``ThreadPoolExecutor``'s
    threads before it exits, and a request to a server that hangs would hold up Ctrl-C."""
    if limit <= 1 or len(items) <= 1:
        return [work(item) for item in items]
    results: list[Any] = [None] * len(items)
    failures: list[BaseException] = []
    indexes = iter(range(len(items)))
    lock = threading.Lock()

    def worker() -> None:
        while not failures:  # after a failure, start nothing new
            with lock:
                index = next(indexes, None)
            if index is None:
                return
            try:
                results[index] = work(items[index])
            except BaseException as error:  # raised again in the caller's thread
                failures.append(error)

    threads = [
        threading.Thread(target=worker, name="longread-tokenize", daemon=True)
        for _ in range(min(limit, len(items)))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return results


def _is_ids(tokens: Any) -> bool:
    return isinstance(tokens, list) and all(isinstance(t, int) for t in tokens)


def _transient(error: BaseException) -> bool:
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
