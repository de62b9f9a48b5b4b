"""MemReread: a MemAgent pass, then rereading the document for the most needed sub-question.

ALGORITHMS.md section 3. After the root pass the model either says STOP or asks one new
sub-question; a fresh MemAgent pass over the whole document answers it, and the answer and the
reread's notes are folded into the root memory. At most ``max_reread`` rounds, then the final
answer comes from the root memory. Every pass reuses MemAgent's step functions.

Calls for N chunks: N + 2 when the first decision is STOP; (R + 1) N + 3R + 1 at most.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass

from ..errors import UsageError
from ..llm.base import Message
from ..text.chunking import Chunk
from ..trace import FORMAT_ERROR, MEMORY_TRUNCATED, Conversation, Run
from .answer import strip_think
from .base import (
    AgentBase,
    CallContext,
    Document,
    finish_run,
)
from .budget import ChunkPlan, check_fits
from .memagent import MemAgentConfig, final_step, plan_memagent_chunk, read_with_memory, run_notes
from .prompts import render

REPEATED_SUBQUESTION = "repeated_subquestion"  # the model asked again what it already asked

_STOP = re.compile(r"<stop\s*/?>|^\s*STOP\s*$", re.IGNORECASE | re.MULTILINE)
_SUBQUESTION = re.compile(r"<subquestion>(.*?)</subquestion>", re.IGNORECASE | re.DOTALL)


@dataclass
class MemRereadConfig(MemAgentConfig):
    """MemAgent's settings plus the rereading budget (reference max_reread: 2 or 3)."""

    max_reread: int = 2  # rereads at most; 0 makes this a plain MemAgent (+ nothing)
    decide_tokens: int = 256  # new tokens for the STOP / sub-question decision

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_reread < 0:
            raise UsageError("max_reread must be 0 or more")
        if self.decide_tokens < 1:
            raise UsageError("decide_tokens must be a positive number of tokens")


@dataclass(frozen=True)
class Decision:
    """What a decide call said: stop, or the next sub-question (with any format problem)."""

    sub_question: str | None
    flags: tuple[str, ...] = ()


def parse_decision(reply: str, asked: list[str]) -> Decision:
    """Read a decide reply. An explicit ``<stop/>`` stops; a ``<subquestion>`` goes on. Anything
    else is a format error: a bare question line is used (flagged), otherwise we stop (flagged),
    never silently. A sub-question already asked is refused (flagged) and stops the rereading."""
    text = strip_think(reply)
    found = [q.strip() for q in _SUBQUESTION.findall(text) if q.strip()]
    if found:
        return _unless_repeated(found[-1], asked, ())
    if _STOP.search(text):
        return Decision(None)
    lines = [line.strip() for line in text.splitlines() if line.strip().endswith("?")]
    if lines:
        return _unless_repeated(lines[-1], asked, (FORMAT_ERROR,))
    return Decision(None, (FORMAT_ERROR,))


def _unless_repeated(question: str, asked: list[str], flags: tuple[str, ...]) -> Decision:
    if _normalise(question) in {_normalise(q) for q in asked}:
        return Decision(None, (*flags, REPEATED_SUBQUESTION))
    return Decision(question, flags)


def _normalise(question: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", question.lower()).split())


def decide_messages(
    question: str, memory: str, history: list[tuple[str, str]], prompt_dir: str | None
) -> list[Message]:
    lines = [f"{i}. {q}\n   Answer: {a}" for i, (q, a) in enumerate(history, 1)]
    text = render(
        "memreread_decide",
        prompt_dir,
        question=question,
        memory=memory,
        history="\n".join(lines) or "(none yet)",
    )
    return [{"role": "user", "content": text}]


def integrate_messages(
    question: str, memory: str, sub_question: str, sub_answer: str, sub_memory: str,
    prompt_dir: str | None,
) -> list[Message]:  # fmt: skip
    text = render(
        "memreread_integrate",
        prompt_dir,
        question=question,
        memory=memory,
        sub_question=sub_question,
        sub_answer=sub_answer,
        sub_memory=sub_memory,
    )
    return [{"role": "user", "content": text}]


class MemReread(AgentBase[MemRereadConfig]):
    """Memory-guided rereading. ``run = await MemReread(backend, tokenizer).run(q, document)``."""

    name = "memreread"

    config_class = MemRereadConfig

    def plan(self, question: str) -> ChunkPlan:
        """Chunks sized for the question and for a sub-question of up to ``decide_tokens``."""
        config, window = self.config, self.backend.context_window
        plan = plan_memagent_chunk(self.tokenizer, window, config, question, config.decide_tokens)
        # Integration carries old memory, sub-answer and sub-memory at once.
        empty = integrate_messages(question, "", "", "", "", config.prompt_dir)[0]["content"]
        carried = 2 * config.memory_tokens + config.final_tokens + config.decide_tokens
        check_fits(
            window=window,
            prompt_tokens=self.tokenizer.count(empty) + carried,
            max_new_tokens=config.memory_tokens,
            what="memory integration",
        )
        return plan

    async def run(self, question: str, document: Document) -> Run:
        start = time.perf_counter()
        question, plan, chunks = await self.prepare(question, document)
        ctx = self.context(len(chunks) + 2)
        memory, trace = await read_with_memory(ctx, self.config, question, chunks, phase="root")
        memory = await self._reread_rounds(ctx, question, memory, chunks, trace)
        final = await final_step(ctx, self.config, question, memory, len(trace), phase="final")
        trace.append(final)
        return finish_run(
            self.name,
            question,
            trace,
            start,
            {**asdict(self.config), "chunk_tokens_used": plan.chunk_tokens},
            run_notes(plan, trace, self.config.memory_tokens) + _reread_notes(trace),
        )

    async def _reread_rounds(
        self, ctx: CallContext, question: str, memory: str, chunks: list[Chunk],
        trace: list[Conversation],
    ) -> str:  # fmt: skip
        """Decide, reread, answer, integrate; up to ``max_reread`` times. Returns the memory."""
        history: list[tuple[str, str]] = []
        for round_ in range(1, self.config.max_reread + 1):
            decision = await self._decide(ctx, question, memory, history, round_, trace)
            if decision.sub_question is None:
                break
            ctx.expected_calls += len(chunks) + 3 - (round_ == self.config.max_reread)
            sub_answer, sub_memory = await self._reread(
                ctx, decision.sub_question, chunks, round_, trace
            )
            history.append((decision.sub_question, sub_answer))
            memory = await self._integrate(
                ctx, question, memory, decision.sub_question, sub_answer, sub_memory, round_, trace
            )
        return memory

    async def _decide(
        self, ctx: CallContext, question: str, memory: str, history: list[tuple[str, str]],
        round_: int, trace: list[Conversation],
    ) -> Decision:  # fmt: skip
        messages = decide_messages(question, memory, history, self.config.prompt_dir)
        params = self.config.params(self.config.decide_tokens)
        conversation = await ctx.call(
            "decide", len(trace), messages, params, phase=f"decide-{round_}"
        )
        decision = parse_decision(conversation.reply, [q for q, _ in history])
        conversation.sub_question = decision.sub_question
        conversation.flags.extend(decision.flags)
        trace.append(conversation)
        return decision

    async def _reread(
        self, ctx: CallContext, sub_question: str, chunks: list[Chunk], round_: int,
        trace: list[Conversation],
    ) -> tuple[str, str]:  # fmt: skip
        """A fresh MemAgent pass with the sub-question as the problem, then its boxed answer."""
        phase = f"reread-{round_}"
        sub_memory, updates = await read_with_memory(
            ctx, self.config, sub_question, chunks, len(trace), phase
        )
        for update in updates:
            update.sub_question = sub_question
        trace.extend(updates)
        answer = await final_step(ctx, self.config, sub_question, sub_memory, len(trace), phase)
        answer.sub_question = sub_question
        trace.append(answer)
        return answer.answer or "", sub_memory

    async def _integrate(
        self, ctx: CallContext, question: str, memory: str, sub_question: str, sub_answer: str,
        sub_memory: str, round_: int, trace: list[Conversation],
    ) -> str:  # fmt: skip
        """Rewrite the root memory with what the reread found (sub-memory included)."""
        messages = integrate_messages(
            question, memory, sub_question, sub_answer, sub_memory, self.config.prompt_dir
        )
        params = self.config.params(self.config.memory_tokens)
        conversation = await ctx.call(
            "integrate", len(trace), messages, params, phase=f"integrate-{round_}",
            sub_question=sub_question,
        )  # fmt: skip
        conversation.memory = strip_think(conversation.reply)
        if conversation.finish_reason == "length":
            conversation.flags.append(MEMORY_TRUNCATED)
        trace.append(conversation)
        return conversation.memory


def _reread_notes(trace: list[Conversation]) -> list[str]:
    rereads = sum(c.kind == "integrate" for c in trace)
    notes = [f"reread the document {rereads} time(s)"] if rereads else []
    if any(FORMAT_ERROR in c.flags for c in trace if c.kind == "decide"):
        notes.append("a decision reply had neither <stop/> nor <subquestion> (format error)")
    if any(REPEATED_SUBQUESTION in c.flags for c in trace):
        notes.append("the model repeated a sub-question; rereading stopped")
    return notes
