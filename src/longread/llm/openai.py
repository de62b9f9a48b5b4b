"""A backend for any OpenAI-compatible chat server: vLLM, SGLang, llama.cpp, Ollama, OpenAI.

Transient failures (429, 5xx, timeouts, dropped connections, a 200 whose body is cut short or
garbled) are retried with exponential backoff, and once the retries are spent end in a
``BackendError`` marked ``transient``; everything else becomes a one-line ``BackendError`` that
names the URL and says what to fix.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from types import TracebackType
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from ..errors import BackendError, UsageError
from .base import Completion, Message, SamplingParams, check_prompt_truncation
from .loops import stop_at_loop

__all__ = ["OpenAIBackend", "check_prompt_truncation"]

log = logging.getLogger(__name__)

# A server asking us to wait longer than this is treated as asking for this long: a run of
# thousands of calls should slow down, not stall for an hour on one header.
MAX_WAIT_SECONDS = 60.0
# 408 is the server timing out on us, which is as transient as our timing out on it.
_RETRY_STATUSES = frozenset({408, 429})
_RETRY_AFTER_STATUSES = frozenset({429, 503})
_MODEL_MISSING_HINTS = ("does not exist", "not found")
_MAX_DETAIL_CHARS = 300


class _TransientError(Exception):
    """One failed attempt worth retrying; ``retry_after`` is the server's requested wait."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _GarbledReplyError(_TransientError):
    """A 200 whose body does not parse as JSON: the server answered, but not readably."""


class _GarbledReplyGaveUp(BackendError):
    """Every attempt got a 200 that did not parse: the server is up, its answers are broken."""


async def _sleep(seconds: float) -> None:
    # Module-level so tests can record backoff waits instead of sleeping through them.
    await asyncio.sleep(seconds)


class OpenAIBackend:
    """``LLMBackend`` over HTTP for any server speaking the OpenAI chat-completions API.

    ``base_url`` may be given with or without the trailing ``/v1``; it and ``api_key`` fall
    back to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``. With ``model=None`` the first model the
    server lists is used (llama.cpp and friends serve exactly one). At most
    ``max_concurrency`` requests are in flight at once; each failing request is retried up to
    ``max_retries`` times, waiting ``backoff_base * 2**n`` seconds (plus jitter) between tries.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        max_retries: int = 5,
        max_concurrency: int = 8,
        context_window: int | None = None,
        backoff_base: float = 1.0,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not url:
            raise UsageError("no server URL: pass --base-url or set OPENAI_BASE_URL")
        if max_retries < 0 or max_concurrency < 1:
            raise UsageError("max_retries must be >= 0 and max_concurrency >= 1")
        self.base_url = normalise_base_url(url)
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self._context_window = context_window
        # Server-specific sampling fields (vLLM's top_k, llama.cpp's repeat_penalty, ...).
        self.extra_body = dict(extra_body or {})
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout))
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._discover_lock = asyncio.Lock()
        self._discovered = False
        self._warned_no_prompt_ids = False

    # -- the LLMBackend protocol ---------------------------------------------------------

    @property
    def context_window(self) -> int | None:
        """The window given to the constructor, else the one ``discover()`` found, else None."""
        return self._context_window

    async def chat(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        """POST one chat completion; raises ``BackendError`` with a one-line reason."""
        if self.model is None:
            await self.discover()
        assert self.model is not None  # discover() raises rather than leave it unset
        url = self._url("/chat/completions")
        response, seconds = await self._send(
            "POST",
            url,
            {**_request_body(self.model, messages, params), **self.extra_body},
            json_reply=True,
        )
        if response.status_code != 200:
            raise await self._status_error(url, response)
        completion = _parse_completion(
            url, response, seconds, self.model, record_tokens=params.record_tokens
        )
        if params.record_tokens and completion.prompt_ids is None:
            self._warn_no_prompt_ids(url)
        if params.loop_stop:
            # No server stops on a loop: the reply came to its end or the cap, and is cut
            # where the embedded model would have stopped (the same text, no time saved).
            stop_at_loop(completion)
        return completion

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.aclose()

    async def __aenter__(self) -> OpenAIBackend:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _warn_no_prompt_ids(self, url: str) -> None:
        # Once per backend: a run makes thousands of calls and the answer will not change.
        if not self._warned_no_prompt_ids:
            self._warned_no_prompt_ids = True
            log.warning(
                "%s returns completion token ids but no prompt_token_ids: the step records will "
                "hold sampled ids without the prompt ids (vLLM >= 0.10.2 returns both)",
                url,
            )

    # -- model discovery -----------------------------------------------------------------

    async def discover(self) -> None:
        """Fetch ``/v1/models`` once: fill in the model id and context window where unset.

        A reply cut short or garbled is asked for again, as chat replies are (``max_retries``).
        Raises ``BackendError`` when the server is unreachable, rejects the key, or cannot
        list models while we still need a model id. With a model already chosen, a server
        without a usable ``/v1/models`` leaves the window unknown, and a warning says so
        (prompts are then not checked against the window) and names ``--context-window``.
        """
        async with self._discover_lock:
            if self._discovered:
                return
            cards, failure = await self._fetch_model_cards(required=self.model is None)
            if self.model is None:
                self.model = str(cards[0]["id"])
            if self._context_window is None:
                self._context_window = _window_from_cards(cards, self.model)
                if self._context_window is None:
                    _warn_unknown_window(self.model, self._url("/models"), failure)
            self._discovered = True

    async def _fetch_model_cards(self, *, required: bool) -> tuple[list[dict[str, Any]], str]:
        """The model cards the server lists and, when there are none, why not."""
        url = self._url("/models")
        try:
            response, _ = await self._send("GET", url, json_reply=True)
        except _GarbledReplyGaveUp as error:
            if required:
                raise BackendError(f"{error}: pass --model", transient=True) from None
            return [], str(error)
        if response.status_code in (401, 403):
            raise _auth_error(url, response)
        cards = _model_cards(response)
        if not cards and required:
            raise BackendError(
                f"could not list the models at {url} ({_describe(response)}): pass --model"
            )
        return cards, f"{url} answered {_describe(response)}" if not cards else ""

    async def _list_model_ids(self) -> list[str] | None:
        """The ids the server lists, or None if it cannot say (used only in error messages)."""
        try:
            response, _ = await self._send("GET", self._url("/models"))
        except BackendError:
            return None
        cards = _model_cards(response)
        return [str(card["id"]) for card in cards] if cards else None

    # -- HTTP with retries ---------------------------------------------------------------

    def _url(self, path: str) -> str:
        return self.base_url + path

    async def _send(
        self, method: str, url: str, body: dict[str, Any] | None = None, *, json_reply: bool = False
    ) -> tuple[httpx.Response, float]:
        """Send with retries; return the first non-transient response and its latency. With
        ``json_reply``, a 200 whose body is not valid JSON (cut short or garbled on the way) is
        transient too."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception_type(_TransientError),
            sleep=_sleep,
            reraise=True,
        )
        try:
            return await retrying(self._attempt, method, url, body, json_reply)
        except _TransientError as exc:
            message = f"{exc} (gave up after {self.max_retries + 1} attempts)"
            if isinstance(exc, _GarbledReplyError):
                raise _GarbledReplyGaveUp(message, transient=True) from None
            raise BackendError(message, transient=True) from None

    async def _attempt(
        self, method: str, url: str, body: dict[str, Any] | None, json_reply: bool
    ) -> tuple[httpx.Response, float]:
        """One request under the concurrency limit; transient failures raise ``_TransientError``."""
        async with self._semaphore:
            start = time.perf_counter()
            try:
                response = await self._client.request(method, url, json=body)
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                raise _TransientError(_transport_message(url, exc, self.timeout)) from exc
            except httpx.HTTPError as exc:  # a bad scheme, a proxy failure: retrying won't help
                raise BackendError(f"request to {url} failed: {exc}") from None
            seconds = time.perf_counter() - start
        status = response.status_code
        if status in _RETRY_STATUSES or status >= 500:
            retry_after = None
            if status in _RETRY_AFTER_STATUSES:
                retry_after = _parse_retry_after(response.headers.get("Retry-After"))
            raise _TransientError(f"{url} answered {_describe(response)}", retry_after)
        if json_reply and status == 200:
            _require_json(url, response)
        return response, seconds

    def _wait(self, state: RetryCallState) -> float:
        """The server's Retry-After when it sent one, else exponential backoff with jitter."""
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _TransientError) and exc.retry_after is not None:
            return exc.retry_after
        backoff = wait_exponential(multiplier=self.backoff_base, max=MAX_WAIT_SECONDS)
        # Jitter keeps many concurrent calls that failed together from retrying in lockstep.
        jitter = wait_random(0, self.backoff_base)
        return float((backoff + jitter)(state))

    # -- turning failures into messages --------------------------------------------------

    async def _status_error(self, url: str, response: httpx.Response) -> BackendError:
        status = response.status_code
        if status in (401, 403):
            return _auth_error(url, response)
        if status == 404 or (status == 400 and _mentions_missing_model(response, self.model)):
            return await self._unknown_model_error(url, response)
        return BackendError(f"{url} rejected the request: {_describe(response)}")

    async def _unknown_model_error(self, url: str, response: httpx.Response) -> BackendError:
        ids = await self._list_model_ids()
        if ids is None:
            return BackendError(
                f"model {self.model!r} not found at {url} ({_describe(response)}) and the server "
                "did not list its models: check --model and --base-url"
            )
        if self.model in ids:
            # The model exists, so the 404 is about the path: not an OpenAI-compatible API here.
            return BackendError(f"{url} answered {_describe(response)}: check --base-url")
        return BackendError(
            f"model {self.model!r} not found at {self.base_url}; the server has: {', '.join(ids)}"
        )


# -- pure helpers --------------------------------------------------------------------------


def normalise_base_url(url: str) -> str:
    """``host:8000``, ``http://host:8000/``, ``http://host:8000/v1/`` all become ``.../v1``."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url  # people type --base-url localhost:8000
    if not url.endswith("/v1"):
        url += "/v1"
    return url


def _request_body(
    model: str, messages: Sequence[Message], params: SamplingParams
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [dict(m) for m in messages],
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
    }
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop:
        body["stop"] = list(params.stop)
    if params.include_stop:
        # The stop string stays in the text: vLLM's name, then SGLang's; OpenAI's API has
        # neither and cuts it off, so a caller relying on it is told to use these servers.
        body["include_stop_str_in_output"] = True
        body["no_stop_trim"] = True
    body.update(_sampler_fields(params))
    if params.grammar is not None:
        # The grammar under each server's name: llama.cpp's server, vLLM (>= 0.10.2; its
        # xgrammar backend reads GBNF), SGLang. Each ignores the others' fields; OpenAI's API
        # refuses them, as it has no grammars.
        body["grammar"] = params.grammar
        body["structured_outputs"] = {"grammar": params.grammar}
        body["ebnf"] = params.grammar
    if params.record_tokens:
        # logprobs: the sampled ids' logprobs (vLLM: raw distribution, before top-p/top-k).
        # return_token_ids (vLLM >= 0.10.2): the prompt ids after the chat template and the
        # sampled ids; other servers ignore or reject it, and cannot record tokens anyway.
        body["logprobs"] = True
        body["return_token_ids"] = True
    return body


def _sampler_fields(params: SamplingParams) -> dict[str, Any]:
    """The sampling knobs beyond OpenAI's own, only where they are on: vLLM, SGLang and the
    llama.cpp servers read them from the body, OpenAI's API refuses fields it does not know.
    The repeat penalty goes under both its names: vLLM's ``repetition_penalty`` and
    llama.cpp's ``repeat_penalty``."""
    fields: dict[str, Any] = {}
    if params.top_k > 0:
        fields["top_k"] = params.top_k
    if params.min_p > 0:
        fields["min_p"] = params.min_p
    if params.repeat_penalty != 1.0:
        fields["repetition_penalty"] = fields["repeat_penalty"] = params.repeat_penalty
    if params.presence_penalty:
        fields["presence_penalty"] = params.presence_penalty
    if params.frequency_penalty:
        fields["frequency_penalty"] = params.frequency_penalty
    return fields


def _require_json(url: str, response: httpx.Response) -> None:
    """Raise ``_GarbledReplyError`` (transient) when a 200's body does not parse: a proxy or
    a server under strain sent it cut short or garbled, and the same request usually comes
    back whole."""
    try:
        response.json()
    except (ValueError, UnicodeDecodeError):
        size = len(response.content)
        raise _GarbledReplyError(
            f"{url} answered 200 with a body that is not valid JSON ({size} bytes: "
            f"{_one_line(response.text[:80])})"
        ) from None


def _parse_completion(
    url: str, response: httpx.Response, seconds: float, model: str, *, record_tokens: bool = False
) -> Completion:
    """The ``Completion`` in a 200 answer; with ``record_tokens`` its ids must be there."""
    try:
        data = response.json()
        choice = data["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        raise BackendError(
            f"{url} answered 200 but not with a chat completion: {_one_line(response.text)}"
        ) from None
    usage = data.get("usage") or {}
    completion = Completion(
        text=(choice.get("message") or {}).get("content") or "",
        finish_reason=choice.get("finish_reason") or "unknown",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        seconds=seconds,
        model=data.get("model") or model,
    )
    if record_tokens:
        _attach_tokens(completion, url, data, choice)
    return completion


def _attach_tokens(
    completion: Completion, url: str, data: dict[str, Any], choice: dict[str, Any]
) -> None:
    """Fill in the token record from vLLM's fields; raise when the sampled ids are missing.

    Training needs the exact sampled ids, so a server that does not return them fails the
    run here rather than leave steps that cannot be trained on.
    """
    logprobs, spelled_ids = _parse_logprobs(choice.get("logprobs"))
    token_ids = _int_list(choice.get("token_ids"))  # vLLM >= 0.10.2, with return_token_ids
    if token_ids is None:
        token_ids = spelled_ids  # older vLLM with --return-tokens-as-token-ids
    if token_ids is None:
        raise BackendError(
            f"{url} cannot record tokens: its reply has no completion token ids (vLLM "
            "provides them); run without --record-tokens"
        )
    if logprobs is not None and len(logprobs) != len(token_ids):
        raise BackendError(
            f"{url} returned {len(token_ids)} token ids but {len(logprobs)} logprobs: "
            "cannot tell which logprob belongs to which id"
        )
    completion.token_ids = token_ids
    completion.logprobs = logprobs
    completion.prompt_ids = _int_list(data.get("prompt_token_ids"))


def _int_list(value: Any) -> list[int] | None:
    """``value`` as a list of ids if it is a list of integers, else None."""
    if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
        return None
    return [int(v) for v in value]


def _parse_logprobs(block: Any) -> tuple[list[float] | None, list[int] | None]:
    """Per-token logprobs, plus token ids when vLLM spells tokens as ``token_id:123``."""
    if not isinstance(block, dict) or not isinstance(block.get("content"), list):
        return None, None
    entries = block["content"]
    logprobs = [float(e["logprob"]) for e in entries]
    tokens = [str(e.get("token", "")) for e in entries]
    if tokens and all(t.startswith("token_id:") for t in tokens):
        return logprobs, [int(t.removeprefix("token_id:")) for t in tokens]
    return logprobs, None


def _model_cards(response: httpx.Response) -> list[dict[str, Any]]:
    """The ``data`` entries of a ``/v1/models`` answer that carry an id; [] if none."""
    if response.status_code != 200:
        return []
    try:
        data = response.json().get("data")
    except (ValueError, AttributeError):
        return []
    if not isinstance(data, list):
        return []
    return [card for card in data if isinstance(card, dict) and card.get("id")]


def _warn_unknown_window(model: str, url: str, why: str) -> None:
    # Once per backend (discover runs once): without a window nothing stops a prompt longer
    # than the server's context, which some servers then cut silently.
    log.warning(
        "the context window of %s is unknown (%s): prompts are not checked against it; "
        "pass --context-window N (the server's context size in tokens)",
        model,
        why or f"{url} reports no context length",
    )


def _window_from_cards(cards: list[dict[str, Any]], model: str) -> int | None:
    card = next((c for c in cards if c.get("id") == model), cards[0] if cards else None)
    if card is None:
        return None
    meta = card.get("meta")
    if not isinstance(meta, dict):
        meta = {}
    # vLLM and SGLang say max_model_len; llama.cpp only reports the training context.
    for value in (
        card.get("max_model_len"),
        card.get("context_length"),
        card.get("context_window"),
        meta.get("n_ctx"),
        meta.get("n_ctx_train"),
    ):
        if isinstance(value, int) and value > 0:
            return value
    return None


def _mentions_missing_model(response: httpx.Response, model: str | None) -> bool:
    text = _error_detail(response).lower()
    if any(hint in text for hint in _MODEL_MISSING_HINTS):
        return True
    # Match the id only when quoted: a bare short id like "m" would match any message.
    quoted = (f"`{model}`", f"'{model}'", f'"{model}"') if model else ()
    return any(q.lower() in text for q in quoted)


def _auth_error(url: str, response: httpx.Response) -> BackendError:
    return BackendError(
        f"server rejected the API key ({_describe(response)} from {url}): "
        "pass --api-key or set OPENAI_API_KEY"
    )


def _transport_message(url: str, exc: httpx.HTTPError, timeout: float) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer from {url} within {timeout:g}s"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot reach OpenAI-compatible server at {url}: {_connect_reason(exc)}"
    return f"connection to {url} failed: {_one_line(str(exc)) or type(exc).__name__}"


def _connect_reason(exc: BaseException) -> str:
    # httpx wraps the OS error two or three levels down ("All connection attempts failed").
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        cause = cause.__cause__ or cause.__context__
    return _one_line(str(exc)) or "connection failed"


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP date), capped."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - datetime.now(timezone.utc)).total_seconds()
    return min(max(seconds, 0.0), MAX_WAIT_SECONDS)


def _describe(response: httpx.Response) -> str:
    """``HTTP 400: <server's message>`` on one line."""
    detail = _error_detail(response)
    return f"HTTP {response.status_code}: {detail}" if detail else f"HTTP {response.status_code}"


def _error_detail(response: httpx.Response) -> str:
    """The human part of an error body: OpenAI's ``error.message``, FastAPI's ``detail``..."""
    try:
        data = response.json()
    except (ValueError, UnicodeDecodeError):
        return _one_line(response.text)
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return _one_line(str(error["message"]))
        for key in ("error", "detail", "message"):
            if data.get(key):
                value = data[key]
                return _one_line(value if isinstance(value, str) else json.dumps(value))
    return _one_line(json.dumps(data))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > _MAX_DETAIL_CHARS:
        return text[: _MAX_DETAIL_CHARS - 3] + "..."
    return text
