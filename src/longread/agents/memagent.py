"""MemAgent: read chunk by chunk, rewriting a bounded memory; answer from the memory alone.

ALGORITHMS.md section 1 (Yu et al. 2025). N chunks cost N + 1 calls, each fitting a fixed window
however long the document is. ``update_step`` and ``final_step`` are the single implementation
of a MemAgent turn: evaluation, serving, MemReread's passes and RL rollouts all call them.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ..llm.base import Message
from ..text.chunking import Chunk
from ..text.tokenizer import Tokenizer
from ..trace import (
    MEMORY_TRUNCATED,
    Conversation,
    Run,
)
from .answer import strip_think
from .base import (
    AgentBase,
    CallContext,
    Document,
    finish_run,
    read_answer,
)
from .budget import ChunkPlan, check_fits, plan_chunk
from .config import SamplingConfig
from .prompts import render

NO_MEMORY = "No previous memory"


@dataclass
class MemAgentConfig(SamplingConfig):
    """MemAgent settings; defaults are the paper's (chunk 5000, memory 1024, final 1024).
    Prompt files: memagent_update.txt, memagent_final.txt."""

    chunk_tokens: int = 5000  # largest chunk; shrunk automatically to fit the window
    memory_tokens: int = 1024  # max new tokens of each memory rewrite (the memory cap)
    final_tokens: int = 1024  # max new tokens of the final answer

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_positive("chunk_tokens", "memory_tokens", "final_tokens")


def update_messages(
    question: str, memory: str, chunk: str, prompt_dir: str | None
) -> list[Message]:
    """The memory-rewrite conversation: problem, memory, section, instruction."""
    text = render("memagent_update", prompt_dir, question=question, memory=memory, chunk=chunk)
    return [{"role": "user", "content": text}]


def final_messages(question: str, memory: str, prompt_dir: str | None) -> list[Message]:
    """The answer conversation: problem and memory only, answer in \\boxed{}."""
    text = render("memagent_final", prompt_dir, question=question, memory=memory)
    return [{"role": "user", "content": text}]


async def update_step(
    ctx: CallContext,
    config: MemAgentConfig,
    question: str,
    memory: str,
    chunk: Chunk,
    step: int,
    phase: str = "",
) -> Conversation:
    """One MemAgent turn: the reply (minus any <think>) replaces the memory."""
    messages = update_messages(question, memory, chunk.text, config.prompt_dir)
    conversation = await ctx.call(
        "update",
        step,
        messages,
        config.params(config.memory_tokens),
        chunk_index=chunk.index,
        chunk_tokens=chunk.tokens,
        phase=phase,
    )
    conversation.memory = strip_think(conversation.reply)
    if conversation.finish_reason == "length":
        conversation.flags.append(MEMORY_TRUNCATED)
    return conversation


async def final_step(
    ctx: CallContext,
    config: MemAgentConfig,
    question: str,
    memory: str,
    step: int,
    phase: str = "",
) -> Conversation:
    """Answer from memory; the answer is the last \\boxed{} (else the whole reply, flagged)."""
    messages = final_messages(question, memory, config.prompt_dir)
    params = config.params(config.final_tokens)
    conversation = await ctx.call("final", step, messages, params, phase=phase)
    return read_answer(conversation)


def plan_memagent_chunk(
    tokenizer: Tokenizer,
    window: int | None,
    config: MemAgentConfig,
    question: str,
    extra_question_tokens: int = 0,
) -> ChunkPlan:
    """Chunk size for this question so that every update call, and the final call, fit.

    ``extra_question_tokens`` reserves room for a longer question asked later (MemReread's
    sub-questions read the document with the same chunks)."""
    memory_room = config.memory_tokens + extra_question_tokens
    empty_update = update_messages(question, "", "", config.prompt_dir)[0]["content"]
    plan = plan_chunk(
        window=window,
        requested=config.chunk_tokens,
        prompt_tokens_without_chunk=tokenizer.count(empty_update) + memory_room,
        max_new_tokens=config.memory_tokens,
    )
    final_prompt = tokenizer.count(final_messages(question, "", config.prompt_dir)[0]["content"])
    check_fits(
        window=window,
        prompt_tokens=final_prompt + memory_room,
        max_new_tokens=config.final_tokens,
        what="final answer",
    )
    return plan


class MemAgent(AgentBase[MemAgentConfig]):
    """The MemAgent reader. ``run = await MemAgent(backend, tokenizer).run(question, document)``."""

    name = "memagent"

    config_class = MemAgentConfig

    def plan(self, question: str) -> ChunkPlan:
        """The chunk size this agent will use for ``question`` on its backend's window."""
        return plan_memagent_chunk(
            self.tokenizer, self.backend.context_window, self.config, question
        )

    async def run(self, question: str, document: Document) -> Run:
        start = time.perf_counter()
        question, plan, chunks = await self.prepare(question, document)
        ctx = self.context(len(chunks) + 1)
        memory, conversations = await read_with_memory(ctx, self.config, question, chunks)
        final = await final_step(ctx, self.config, question, memory, len(conversations))
        conversations.append(final)
        return finish_run(
            self.name,
            question,
            conversations,
            start,
            {**asdict(self.config), "chunk_tokens_used": plan.chunk_tokens},
            run_notes(plan, conversations, self.config.memory_tokens),
        )


async def read_with_memory(
    ctx: CallContext,
    config: MemAgentConfig,
    question: str,
    chunks: list[Chunk],
    first_step: int = 0,
    phase: str = "",
) -> tuple[str, list[Conversation]]:
    """The MemAgent pass: fold every chunk into the memory, in order. Returns the memory and
    the update conversations."""
    memory = NO_MEMORY
    conversations: list[Conversation] = []
    for offset, chunk in enumerate(chunks):
        step = first_step + offset
        conversation = await update_step(ctx, config, question, memory, chunk, step, phase)
        memory = conversation.memory or ""
        conversations.append(conversation)
    return memory, conversations


def run_notes(plan: ChunkPlan, conversations: list[Conversation], memory_cap: int) -> list[str]:
    """Things the user should know about how the run went."""
    notes = [note] if (note := plan.note()) else []
    cut = sum(MEMORY_TRUNCATED in c.flags for c in conversations)
    if cut:
        notes.append(f"{cut} memory update(s) reached the {memory_cap}-token cap and were cut")
    return notes
