"""What every agent shares: the Agent protocol, document preparation, and one traced LLM call."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from ..errors import BudgetError, UsageError
from ..llm.base import Completion, LLMBackend, Message, SamplingParams, check_prompt_truncation
from ..text.chunking import Chunk, chunk_text
from ..text.tokenizer import Tokenizer
from ..trace import ANSWER_TRUNCATED, NO_BOXED_ANSWER, Conversation, Run
from .answer import extract_boxed, strip_think
from .budget import ChunkPlan

log = logging.getLogger(__name__)

Document = str | Sequence[Chunk]
# Called after every LLM call with the conversation and the run's expected number of calls.
ProgressCallback = Callable[[Conversation, int], None]


@runtime_checkable
class Agent(Protocol):
    """Answers a question about a document of any length."""

    name: str

    async def run(self, question: str, document: Document) -> Run:
        """Read ``document`` and answer ``question``; the Run holds the answer and the trace."""
        ...


@dataclass
class CallContext:
    """The backend and tokenizer an agent talks through, plus where to report progress."""

    backend: LLMBackend
    tokenizer: Tokenizer
    progress: ProgressCallback | None = None
    expected_calls: int = 0

    def count(self, text: str) -> int:
        return self.tokenizer.count(text)

    async def call(
        self, kind: str, step: int, messages: list[Message], params: SamplingParams, **extra: object
    ) -> Conversation:
        """Send one conversation and record it. Backend failures propagate (never an empty
        answer): a run either completes or fails loudly."""
        completion = await self.backend.chat(messages, params)
        conversation = Conversation.from_completion(kind, step, messages, completion, **extra)
        if self.progress is not None:  # before the check: a refused call was still paid for
            self.progress(conversation, self.expected_calls)
        _check_not_truncated(self, messages, completion)
        return conversation


ConfigT = TypeVar("ConfigT")


class AgentBase(Generic[ConfigT]):
    """What every agent holds: the backend, the tokenizer that counts its tokens, a config
    (the agent's own dataclass, paper defaults when omitted) and an optional progress callback."""

    name: ClassVar[str]
    config_class: ClassVar[type[Any]]

    def __init__(
        self,
        backend: LLMBackend,
        tokenizer: Tokenizer,
        config: ConfigT | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        self.backend = backend
        self.tokenizer = tokenizer
        self.config: ConfigT = config if config is not None else self.config_class()
        self.progress = progress

    def plan(self, question: str) -> ChunkPlan:
        """The chunk size this agent will use for ``question`` on its backend's window."""
        raise NotImplementedError

    async def prepare(
        self, question: str, document: Document
    ) -> tuple[str, ChunkPlan, list[Chunk]]:
        """The checked question, the chunk plan for it, and the document cut to that plan."""
        question = require_question(question)
        plan = self.plan(question)
        chunks = await prepare_chunks(document, self.tokenizer, plan.chunk_tokens)
        return question, plan, chunks

    def context(self, expected_calls: int) -> CallContext:
        """A CallContext for one run expected to make ``expected_calls`` calls."""
        return CallContext(self.backend, self.tokenizer, self.progress, expected_calls)


def _check_not_truncated(ctx: CallContext, messages: list[Message], completion: Completion) -> None:
    """Catch servers that silently cut prompts: compare the reported prompt tokens with our
    count. An approximate tokenizer cannot tell, so it is not asked."""
    if getattr(ctx.tokenizer, "exact", True):
        expected = sum(ctx.count(m["content"]) for m in messages)
        check_prompt_truncation(completion, expected)


def read_answer(conversation: Conversation) -> Conversation:
    """Set the answer of a final call: its last \\boxed{} (else the whole reply, flagged
    ``no_boxed_answer``). The same rule for every agent, so one judge scores them all."""
    reply = strip_think(conversation.reply)
    boxed = extract_boxed(reply)
    conversation.answer = boxed if boxed is not None else reply
    if boxed is None:
        conversation.flags.append(NO_BOXED_ANSWER)
    if conversation.finish_reason == "length":
        conversation.flags.append(ANSWER_TRUNCATED)
    return conversation


def finish_run(
    agent: str,
    question: str,
    conversations: list[Conversation],
    started: float,
    config: dict[str, object],
    notes: list[str],
) -> Run:
    """The Run of a finished agent: the answer is the last conversation's (a final call)."""
    final = conversations[-1]
    return Run(
        agent=agent,
        question=question,
        answer=final.answer or "",
        final_reply=strip_think(final.reply),
        boxed=NO_BOXED_ANSWER not in final.flags,
        conversations=conversations,
        seconds=time.perf_counter() - started,
        config=config,
        notes=notes,
    )


def require_question(question: str) -> str:
    question = question.strip()
    if not question:
        raise UsageError("the question is empty")
    return question


async def prepare_chunks(document: Document, tokenizer: Tokenizer, max_tokens: int) -> list[Chunk]:
    """Chunks of at most ``max_tokens``: cut a string (in a worker thread, so long texts never
    block the event loop), or check chunks the caller cut already."""
    if isinstance(document, str):
        if not document.strip():
            raise UsageError("the document is empty")
        return await asyncio.to_thread(chunk_text, document, tokenizer, max_tokens)
    chunks = list(document)
    if not chunks:
        raise UsageError("the document is empty")
    too_big = [c for c in chunks if c.tokens > max_tokens]
    if too_big:
        raise BudgetError(
            f"chunk {too_big[0].index} has {too_big[0].tokens} tokens but this run allows "
            f"{max_tokens}; cut the document with max_tokens={max_tokens}"
        )
    return chunks


def run_sync(agent: Agent, question: str, document: Document) -> Run:
    """Synchronous convenience for scripts and notebooks without an event loop."""
    return asyncio.run(agent.run(question, document))
