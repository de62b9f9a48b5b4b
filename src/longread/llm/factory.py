"""Choosing a backend and the tokenizer that counts its tokens, from CLI-style settings."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..text.tokenizer import Tokenizer
from .base import LLMBackend

if TYPE_CHECKING:
    from ..text.tokenizers import LlamaCppTokenizer

log = logging.getLogger(__name__)

BACKENDS = ("auto", "llamacpp", "openai")
# The calls in which MemReread decides what to reread and folds its answer in: where a
# decision adapter (--decision-adapter) applies, the reading passes keeping the memory adapter.
DECISION_CALLS = ("decide", "integrate")
# The exit probe's yes/no calls (memagent, memreread's first pass): where a probe adapter
# (--probe-adapter, or memagent's shipped one) applies, the updates keeping the memory adapter.
PROBE_CALLS = ("probe",)


@dataclass
class BackendSettings:
    """Everything needed to build a backend; mirrors the CLI flags."""

    backend: str = "auto"  # auto: openai when a server URL is given, else the embedded model
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    context_window: int | None = None
    timeout: float = 600.0
    max_retries: int = 5
    max_concurrency: int = 8
    extra_body: dict[str, Any] | None = None  # extra JSON fields for every chat request
    gguf: str | None = None
    quant: str | None = None
    n_ctx: int | None = None
    tokenizer: str | None = None  # tokenizer.json or HF model folder (OpenAI backend)
    adapter: str | None = None  # llama.cpp LoRA adapter GGUF (embedded backend only)
    adapter_scale: float = 1.0
    base_model: bool = False  # the bundled model without its shipped memory adapter
    parallel: int | None = None  # embedded: calls decoded together (None: one at a time)
    # Embedded: greedy calls check drafted ids in one step (prompt-lookup decoding). None: on
    # where it can act, the embedded model one call at a time (the default since stop 78, when
    # it had read every results set with no sample lost); False: one decode step per token.
    lookup_decoding: bool | None = None
    # The agent the backend serves: on the bundled model it gets its own shipped adapter
    # where one ships (memory_adapter.bundled_memory_adapter); None: the shared one.
    agent: str | None = None
    # --update-gate on: the agent's updates read with the shipped adapter trained for the gate
    # where one ships (memory_adapter.bundled_gate_adapter), in place of the shared one.
    update_gate: bool = False
    # Step kind -> LoRA adapter GGUF for those calls only (the embedded model, loaded once
    # more per adapter): --decision-adapter's decide and integrate calls, --probe-adapter's
    # probe calls. They take those kinds from the agent's own shipped adapter, if any.
    call_adapters: dict[str, str] | None = None
    # Kinds of call the run never makes (the probe with the exit probe off): no adapter is
    # loaded or recorded for them, so a run's record names only the adapters it read with.
    idle_calls: frozenset[str] = frozenset()

    def resolved_backend(self) -> str:
        """The backend that will run: "auto" decided; UsageError for settings it cannot take."""
        if self.backend not in BACKENDS:
            raise UsageError(f"unknown backend {self.backend!r}; choose one of {BACKENDS}")
        resolved = self.backend
        if resolved == "auto":
            server = self.base_url or os.environ.get("OPENAI_BASE_URL")
            resolved = "openai" if server else "llamacpp"
        if resolved == "openai" and self.adapter:
            raise UsageError(
                "--adapter applies a LoRA to the embedded model; a server loads its own "
                "adapters (serve one there and pass its --model name)"
            )
        if resolved == "openai" and self.base_model:
            raise UsageError("--base-model is for the embedded model; a server runs its own")
        if resolved == "openai" and self.parallel is not None:
            raise UsageError(
                "--parallel batches calls on the embedded model; a server batches concurrent "
                "requests itself (raise --concurrency instead)"
            )
        if self.lookup_decoding and resolved == "openai":
            raise UsageError(
                "--lookup-decoding is for the embedded model; a server has its own speculative "
                "decoding (e.g. vLLM's ngram speculator)"
            )
        if self.lookup_decoding and self.parallel is not None:
            raise UsageError("--lookup-decoding works on one call at a time; drop --parallel")
        if self.call_adapters and resolved == "openai":
            raise UsageError(
                "--decision-adapter and --probe-adapter apply a LoRA to the embedded model; a "
                "server loads its own adapters"
            )
        if self.call_adapters and self.base_model:
            raise UsageError("--base-model runs the model without any adapter; drop "
                             "--decision-adapter and --probe-adapter")  # fmt: skip
        if self.adapter_scale != 1.0 and resolved == "llamacpp" and not self.applied_adapter():
            raise UsageError("--adapter-scale scales an --adapter; none was given")
        return resolved

    def resolved_lookup_decoding(self) -> bool:
        """Whether the embedded model's greedy calls decode with prompt-lookup drafts: as
        given, else on for the embedded model decoding one call at a time (never on a server,
        and never beside ``--parallel``, whose batches it cannot draft for)."""
        resolved = self.resolved_backend()
        if self.lookup_decoding is not None:
            return self.lookup_decoding
        return resolved == "llamacpp" and self.parallel is None

    def applied_adapter(self) -> str | None:
        """The LoRA adapter the embedded backend will apply (``memory_adapter.applied_adapter``:
        ``--adapter``, else the shipped memory adapter on the bundled model), or None."""
        from .memory_adapter import applied_adapter

        adapter = applied_adapter(
            self.gguf, self.adapter, self.base_model, self.agent, self.update_gate
        )
        return str(adapter) if adapter else None

    def applied_call_adapters(self) -> dict[str, str]:
        """The kinds of call with an adapter of their own: those the agent's own shipped
        adapter takes where the shipped adapters apply (``memory_adapter.bundled_call_adapters``),
        with ``call_adapters`` (``--decision-adapter``, ``--probe-adapter``) in place of them for
        the kinds they name; none of ``idle_calls``; {} on a server."""
        from .memory_adapter import MEMORY_ADAPTER_NAME, bundled_call_adapters

        applied = {}
        shipped = self.adapter == MEMORY_ADAPTER_NAME or (not self.adapter and self.gguf is None)
        if shipped and not self.base_model and self.resolved_backend() == "llamacpp":
            applied = {kind: str(path) for kind, path in bundled_call_adapters(self.agent).items()}
        applied.update(self.call_adapters or {})
        return {kind: path for kind, path in applied.items() if kind not in self.idle_calls}


def make_backend(settings: BackendSettings) -> LLMBackend:
    """Build the backend the settings describe (the embedded model loads lazily on first call)."""
    if settings.resolved_backend() == "openai":
        from .openai import OpenAIBackend

        return OpenAIBackend(
            base_url=settings.base_url,
            model=settings.model,
            api_key=settings.api_key,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            max_concurrency=settings.max_concurrency,
            context_window=settings.context_window,
            extra_body=settings.extra_body,
        )
    from .gguf import SMOLLM2_CONTEXT
    from .llamacpp import LlamaCppBackend

    return LlamaCppBackend(
        settings.gguf,
        quant=settings.quant,
        n_ctx=settings.n_ctx or SMOLLM2_CONTEXT,
        adapter=settings.applied_adapter(),  # resolved for the agent it serves
        adapter_scale=settings.adapter_scale,
        base_model=settings.base_model,
        parallel=settings.parallel,
        lookup_decoding=settings.resolved_lookup_decoding(),
    )


def make_call_backends(
    settings: BackendSettings, by_adapter: dict[str, LLMBackend] | None = None
) -> dict[str, LLMBackend]:
    """A backend for each kind of call with an adapter of its own (``applied_call_adapters``):
    the embedded model with that adapter, one per adapter; {} when none. ``by_adapter``: the
    backends already made, by adapter, shared with the caller's other agents (``serve``)."""
    by_adapter = {} if by_adapter is None else by_adapter
    return {
        kind: backend_with_adapter(settings, adapter, by_adapter)
        for kind, adapter in settings.applied_call_adapters().items()
    }


def backend_with_adapter(
    settings: BackendSettings, adapter: str, by_adapter: dict[str, LLMBackend]
) -> LLMBackend:
    """The embedded model with ``adapter`` for all its calls: the one in ``by_adapter``, else a
    new one (kept there; it loads on its first call)."""
    if adapter not in by_adapter:
        by_adapter[adapter] = make_backend(replace(settings, adapter=adapter, call_adapters=None))
    return by_adapter[adapter]


async def close_all(backends: Iterable[LLMBackend]) -> None:
    """Close each backend once (several kinds of call may share one)."""
    for backend in {id(b): b for b in backends}.values():
        await backend.aclose()


async def make_tokenizer(backend: LLMBackend, settings: BackendSettings) -> Tokenizer:
    """The most exact tokenizer available for ``backend``: a given tokenizer.json, the embedded
    model's own vocabulary, the server's /tokenize endpoint, else a character estimate."""
    from ..text import run_cancellable, tokenizers
    from .openai import OpenAIBackend

    # A tokenizer file first: a bad path is refused before any server is contacted.
    given = tokenizers.HFTokenizer.from_path(settings.tokenizer) if settings.tokenizer else None
    if isinstance(backend, OpenAIBackend):
        # The window too: chunk plans and the truncation check need it, whatever counts tokens.
        await backend.discover()
    if given is not None:
        return given
    from .llamacpp import LlamaCppBackend

    if isinstance(backend, LlamaCppBackend):
        own = tokenizers.LlamaCppTokenizer(backend.llama)  # reuse the loaded model
        gguf = backend.llama.model_path
        # Off the loop: the first start reads the GGUF vocabulary and builds the tokenizer.
        return await run_cancellable(lambda _: _fast_equivalent(own, gguf))

    if isinstance(backend, OpenAIBackend):
        url, model = backend.base_url, backend.model
        # Not asyncio.to_thread: Ctrl-C must not wait for a probe of a server that hangs.
        probed = await run_cancellable(lambda _: tokenizers.ServerTokenizer.probe(url, model))
        if probed is not None:
            return probed
    log.warning(
        "no exact tokenizer for this server: chunk sizes are estimated from characters; "
        "pass --tokenizer PATH (a tokenizer.json or model folder) for exact counts"
    )
    return tokenizers.ApproxTokenizer()


def _fast_equivalent(own: LlamaCppTokenizer, gguf: str) -> Tokenizer:
    """The same ids as llama.cpp's ``own`` tokenizer through HF tokenizers (parallel, many
    times faster on long documents) where the vocabulary allows it, else ``own``."""
    from ..text.gguf_vocab import fast_tokenizer

    try:
        return fast_tokenizer(gguf, own) or own
    except (OSError, ValueError, UnicodeDecodeError) as error:  # an unreadable file or cache
        log.warning("no fast tokenizer for %s (%s); counting with llama.cpp", gguf, error)
        return own
