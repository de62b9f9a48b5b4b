"""What every agent shares: the Agent protocol, document preparation, and one traced LLM call."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from ..citations import Evidence, Provenance
from ..errors import BackendError, BudgetError, UsageError
from ..llm.base import (
    ESTIMATE_TOLERANCE,
    EXACT_TOLERANCE,
    Completion,
    LLMBackend,
    Message,
    SamplingParams,
    check_prompt_truncation,
)
from ..text.chunking import Chunk, SpooledChunks, achunk_text, run_cancellable
from ..text.tokenizer import Tokenizer
from ..text.tokenizers import ServerTokenizer
from ..trace import NO_BOXED_ANSWER, Run, Step, StepKind, StepSink, new_run_id, utc_now
from .answer import given_reply
from .budget import ChunkPlan
from .config import SamplingConfig

log = logging.getLogger(__name__)

Document = str | Sequence[Chunk]
# Called after every LLM call with the step and the run's expected number of calls.
ProgressCallback = Callable[[Step, int], None]


@runtime_checkable
class Agent(Protocol):
    """Answers a question about a document of any length. Callers (the CLI, evaluation,
    serving, training) use exactly this."""

    @property
    def name(self) -> str:
        """The agent's registry name ("memagent", "rag", ...)."""
        ...

    def plan(self, question: str) -> ChunkPlan:
        """The chunk size this agent will use for ``question`` on its backend's window (callers
        that cut a file themselves cut it to this size)."""
        ...

    async def run(
        self,
        question: str,
        document: Document,
        *,
        sample_id: str | None = None,
        sink: StepSink | None = None,
        run_id: str | None = None,
    ) -> Run:
        """Read ``document`` and answer ``question``; the Run holds the answer and every step.
        ``sample_id`` names the sample in every step record (evaluation and training set it),
        ``run_id`` the run (default: a new id; the server names a run before it starts);
        a ``sink`` gets each step once complete, and the Run then keeps their bookkeeping only
        (``ask`` and ``eval run`` stream traces to disk this way)."""
        ...


@dataclass
class CallContext:
    """What one run's calls go through: the backend, the tokenizer that counts its tokens,
    the ids every step record carries, and where to report progress.

    ``record_tokens`` asks the backend for prompt ids, sampled ids and logprobs and keeps them
    in each step's ``tokens`` (training needs them; off by default: it costs trace space).

    With a ``sink``, each step goes to it once complete, and then sheds its text
    (``Step.shed_text``). A step is complete when the next call begins (agents read and flag
    a reply before they make their next call) or when the run ends (``flush``)."""

    backend: LLMBackend
    tokenizer: Tokenizer
    progress: ProgressCallback | None = None
    expected_calls: int = 0
    run_id: str = field(default_factory=new_run_id)
    sample_id: str | None = None
    record_tokens: bool = False
    sink: StepSink | None = None
    # Kinds of call sent to a backend of their own (MemReread's decisions with a decision
    # adapter); every other call goes to ``backend``.
    call_backends: Mapping[str, LLMBackend] = field(default_factory=dict)
    # Where each note of this run's memories was read (citations; see longread.citations).
    provenance: Provenance = field(default_factory=Provenance)
    _pending: Step | None = field(default=None, init=False, repr=False)

    def count(self, text: str) -> int:
        return self.tokenizer.count(text)

    async def count_prompt(self, messages: list[Message]) -> int:
        """The tokens of the messages' contents. A tokenizer that asks a server counts on a
        worker thread: a blocking round trip on the event loop would stall every other run
        of a concurrent evaluation, and counts all the messages in one request where the server
        takes many texts (``count_many``)."""
        contents = [message["content"] for message in messages]
        if not isinstance(self.tokenizer, ServerTokenizer):
            return sum(self.tokenizer.count(text) for text in contents)
        tokenizer = self.tokenizer
        return await run_cancellable(lambda _: sum(tokenizer.count_many(contents)))

    def flush(self, *, shed: bool = True) -> None:
        """Hand the last step to the sink; ``shed=False`` keeps its text (the final step,
        which the Run is made of)."""
        step, self._pending = self._pending, None
        if step is not None and self.sink is not None:
            self.sink.write(step)
            if shed:
                step.shed_text()

    async def call(
        self,
        kind: StepKind,
        step: int,
        messages: list[Message],
        params: SamplingParams,
        **extra: Any,
    ) -> Step:
        """Send one conversation and record it. Backend failures propagate (never an empty
        answer): a run either completes or fails loudly."""
        if self.record_tokens:
            params = replace(params, record_tokens=True)
        self.flush()  # the previous step is complete: its reply was read before this call
        started = utc_now()
        backend = self.call_backends.get(kind, self.backend)
        completion = await backend.chat(messages, params)
        record = Step.from_completion(
            kind, step, messages, completion, started=started,
            record_tokens=self.record_tokens, **extra,
        )  # fmt: skip
        record.run_id, record.sample_id = self.run_id, self.sample_id
        self._pending = record
        if self.progress is not None:  # before the checks: a refused call was still paid for
            self.progress(record, self.expected_calls)
        _check_not_truncated(self, await self.count_prompt(messages), params, completion)
        if self.record_tokens and record.tokens is None:
            raise BackendError(
                f"the {self.backend.name} backend returned no token ids although the run "
                "records tokens; use the embedded backend or a vLLM server"
            )
        return record


@dataclass
class Reading:
    """What an agent's ``read`` leaves: its steps (the last one a final call), the settings it
    actually used (added to the run's config), notes for the user, and the answer's evidence
    (the spans of the document that hold it)."""

    steps: list[Step]
    used: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    evidence: Evidence = field(default_factory=Evidence)


ConfigT = TypeVar("ConfigT", bound=SamplingConfig)


class AgentBase(Generic[ConfigT]):
    """What every agent holds: the backend, the tokenizer that counts its tokens, a config
    (the agent's own dataclass, paper defaults when omitted), an optional progress callback,
    and whether its step records keep token ids. Subclasses implement ``plan`` and ``read``;
    ``run`` is the one run skeleton they share."""

    name: ClassVar[str]
    config_class: ClassVar[type[Any]]

    def __init__(
        self,
        backend: LLMBackend,
        tokenizer: Tokenizer,
        config: ConfigT | None = None,
        progress: ProgressCallback | None = None,
        *,
        record_tokens: bool = False,
        call_backends: Mapping[str, LLMBackend] | None = None,
    ) -> None:
        self.backend = backend
        self.tokenizer = tokenizer
        self.config: ConfigT = config if config is not None else self.config_class()
        self.progress = progress
        self.record_tokens = record_tokens
        # Kinds of call sent to a backend of their own (CallContext.call_backends).
        self.call_backends = dict(call_backends or {})

    def plan(self, question: str) -> ChunkPlan:
        """The chunk size this agent will use for ``question`` on its backend's window."""
        raise NotImplementedError

    async def read(self, ctx: CallContext, question: str, document: Document) -> Reading:
        """Make the run's calls through ``ctx``; the agent's own method."""
        raise NotImplementedError

    async def run(
        self,
        question: str,
        document: Document,
        *,
        sample_id: str | None = None,
        sink: StepSink | None = None,
        run_id: str | None = None,
    ) -> Run:
        """Read ``document`` and answer ``question``; the Run holds the answer and every step.
        With a ``sink`` (a ``TraceWriter``; ``DISCARD``), every step goes there once complete
        and the Run keeps only their bookkeeping (``Run.streamed``)."""
        started, clock = utc_now(), time.perf_counter()
        question = require_question(question)
        ctx = self.new_context(sample_id=sample_id, sink=sink, run_id=run_id)
        reading = await self.read(ctx, question, document)
        return self.make_run(ctx, question, reading, started, time.perf_counter() - clock)

    def new_context(
        self,
        *,
        sample_id: str | None = None,
        sink: StepSink | None = None,
        run_id: str | None = None,
    ) -> CallContext:
        """The context one run's calls go through (one per question when several questions
        are read together: each keeps its own ids, sink and step records)."""
        return CallContext(
            self.backend, self.tokenizer, self.progress,
            sample_id=sample_id, record_tokens=self.record_tokens, sink=sink,
            run_id=run_id or new_run_id(), call_backends=self.call_backends,
        )  # fmt: skip

    def make_run(
        self, ctx: CallContext, question: str, reading: Reading, started: str, seconds: float
    ) -> Run:
        """The Run of a finished reading: its last step, kept whole, holds the answer."""
        ctx.flush(shed=False)
        final = reading.steps[-1]
        return Run(
            agent=self.name,
            question=question,
            answer=final.answer or "",
            final_reply=given_reply(final),
            boxed=NO_BOXED_ANSWER not in final.flags,
            steps=reading.steps,
            seconds=seconds,
            config={**asdict(self.config), **reading.used},
            notes=reading.notes,
            run_id=ctx.run_id,
            sample_id=ctx.sample_id,
            started=started,
            citations=reading.evidence.citations,
            supported=reading.evidence.supported,
            streamed=ctx.sink is not None,
        )

    async def chunks(self, question: str, document: Document) -> tuple[ChunkPlan, Sequence[Chunk]]:
        """The chunk plan for ``question`` and the document cut to it."""
        plan = self.plan(question)
        return plan, await prepare_chunks(document, self.tokenizer, plan.chunk_tokens)


def _check_not_truncated(
    ctx: CallContext, prompt_tokens: int, params: SamplingParams, completion: Completion
) -> None:
    """Catch servers that silently cut prompts: compare the reported prompt tokens with our
    count, with a tolerance that fits how exact the count is. An estimate may also run short
    of the real prompt, which a server then cuts to its window: with the window known, a
    prompt that filled it is caught too (exact counts never run short: every call was
    planned to fit)."""
    exact = getattr(ctx.tokenizer, "exact", True)
    check_prompt_truncation(
        completion,
        prompt_tokens,
        EXACT_TOLERANCE if exact else ESTIMATE_TOLERANCE,
        window=None if exact else ctx.backend.context_window,
        max_tokens=params.max_tokens,
    )


def require_question(question: str) -> str:
    question = question.strip()
    if not question:
        raise UsageError("the question is empty")
    return question


async def prepare_chunks(
    document: Document, tokenizer: Tokenizer, max_tokens: int
) -> Sequence[Chunk]:
    """Chunks of at most ``max_tokens``: cut a string (in a worker thread, so long texts never
    block the event loop), or check chunks the caller cut already. Those are used as given,
    never copied: ``achunk_file``'s chunks stay on disk until each is read."""
    if isinstance(document, str):
        if not document.strip():
            raise UsageError("the document is empty")
        return await achunk_text(document, tokenizer, max_tokens)
    if not document:
        raise UsageError("the document is empty")
    counts = (
        document.token_counts()
        if isinstance(document, SpooledChunks)
        else [c.tokens for c in document]
    )
    too_big = next((i for i, tokens in enumerate(counts) if tokens > max_tokens), None)
    if too_big is not None:
        raise BudgetError(
            f"chunk {too_big} has {counts[too_big]} tokens but this run allows "
            f"{max_tokens}; cut the document with max_tokens={max_tokens}"
        )
    return document


def run_sync(agent: Agent, question: str, document: Document) -> Run:
    """Synchronous convenience for scripts and notebooks without an event loop."""
    return asyncio.run(agent.run(question, document))
