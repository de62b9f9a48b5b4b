"""MemReread: a MemAgent pass, then rereading the document for the most needed sub-question.

ALGORITHMS.md section 3. After the root pass the model either says STOP or asks one new
sub-question; a fresh MemAgent pass over the whole document answers it, and the answer and the
reread's notes are folded into the root memory. At most ``max_reread`` rounds, then the final
answer comes from the root memory. Every pass reuses MemAgent's step functions.

Calls for N chunks: N + 2 when the first decision is STOP; (R + 1) N + 3R + 1 at most.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import BudgetError, UsageError
from ..llm.base import Message
from ..text.chunking import Chunk
from ..trace import DECISION_TRUNCATED, FORMAT_ERROR, Reread, Step
from .answer import keep_memory, memory_text, strip_think
from .base import AgentBase, CallContext, Document, Reading
from .budget import ChunkPlan, check_fits, fixed_cost
from .memagent import (
    MemAgentConfig,
    answer_evidence,
    final_step,
    plan_memagent_chunk,
    read_with_memory,
    run_notes,
)
from .prompts import Prompts, render

REPEATED_SUBQUESTION = "repeated_subquestion"  # the model asked again what it already asked
# The decide prompt could not hold every earlier (sub-question, answer) pair; the oldest were
# left out so the call fits the window.
HISTORY_TRIMMED = "history_trimmed"

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
    # A reply cut inside an unclosed tag may still hold a question; the tag is not part of it.
    bare = re.sub(r"</?\s*subquestion\s*>", " ", text, flags=re.IGNORECASE)
    lines = [line.strip() for line in bare.splitlines() if line.strip().endswith("?")]
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
    question: str, memory: str, history: list[tuple[str, str]], prompts: Prompts | None
) -> list[Message]:
    lines = [f"{i}. {q}\n   Answer: {a}" for i, (q, a) in enumerate(history, 1)]
    text = render(
        "memreread_decide",
        prompts,
        question=question,
        memory=memory,
        history="\n".join(lines) or "(none yet)",
    )
    return [{"role": "user", "content": text}]


def integrate_messages(
    question: str, memory: str, sub_question: str, sub_answer: str, sub_memory: str,
    prompts: Prompts | None,
) -> list[Message]:  # fmt: skip
    text = render(
        "memreread_integrate",
        prompts,
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
        """Chunks sized for the question and for a sub-question of up to ``decide_tokens``;
        the integrate call must fit too. (A decide call with no history is smaller than an
        integrate call; its growing history is fitted at each call, see ``_fit_decision``.)"""
        config, window = self.config, self.backend.context_window
        plan = plan_memagent_chunk(self.tokenizer, window, config, question, config.decide_tokens)
        # Integration carries old memory, sub-answer and sub-memory at once.
        empty = integrate_messages(question, "", "", "", "", config.prompts)[0]["content"]
        carried = 2 * config.memory_tokens + config.final_tokens + config.decide_tokens
        check_fits(
            window=window,
            prompt_tokens=self.tokenizer.count(empty) + carried,
            max_new_tokens=config.memory_tokens,
            what="memory integration",
        )
        return plan

    async def read(self, ctx: CallContext, question: str, document: Document) -> Reading:
        plan, chunks = await self.chunks(question, document)
        ctx.expected_calls = len(chunks) + 2
        memory, trace = await read_with_memory(ctx, self.config, question, chunks, phase="root")
        memory = await self._reread_rounds(ctx, question, memory, chunks, trace)
        final = await final_step(ctx, self.config, question, memory, len(trace), phase="final")
        trace.append(final)
        notes = run_notes(plan, trace, self.config.memory_tokens) + _reread_notes(trace)
        evidence = answer_evidence(ctx, final, question, memory, chunks)
        return Reading(trace, {"chunk_tokens_used": plan.chunk_tokens}, notes, evidence)

    async def _reread_rounds(
        self, ctx: CallContext, question: str, memory: str, chunks: Sequence[Chunk],
        trace: list[Step],
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
        round_: int, trace: list[Step],
    ) -> Decision:  # fmt: skip
        messages, dropped = self._fit_decision(ctx, question, memory, history)
        params = self.config.params(self.config.decide_tokens)
        record = await ctx.call("decide", len(trace), messages, params, phase=f"decide-{round_}")
        decision = parse_decision(record.reply, [q for q, _ in history])
        if decision.sub_question is not None:
            record.reread = Reread(decision.sub_question)
        record.flags.extend(decision.flags)
        if dropped:
            record.flags.append(HISTORY_TRIMMED)
        if record.truncated:
            record.flags.append(DECISION_TRUNCATED)
        trace.append(record)
        return decision

    def _fit_decision(
        self, ctx: CallContext, question: str, memory: str, history: list[tuple[str, str]]
    ) -> tuple[list[Message], int]:
        """The decide conversation, and how many of the oldest history pairs were left out so
        that it fits the window (its prompt grows with every round)."""
        window = self.backend.context_window
        for dropped in range(len(history) + 1):
            messages = decide_messages(question, memory, history[dropped:], self.config.prompts)
            if window is None:
                return messages, dropped
            needed = ctx.count(messages[0]["content"]) + self.config.decide_tokens
            if needed + fixed_cost(window) <= window:
                return messages, dropped
        raise BudgetError(
            f"the reread decision does not fit the {window}-token window even without its "
            "history; use smaller --memory-tokens or --decide-tokens"
        )

    async def _reread(
        self, ctx: CallContext, sub_question: str, chunks: Sequence[Chunk], round_: int,
        trace: list[Step],
    ) -> tuple[str, str]:  # fmt: skip
        """A fresh MemAgent pass with the sub-question as the problem, then its boxed answer."""
        phase, reread = f"reread-{round_}", Reread(sub_question)
        sub_memory, updates = await read_with_memory(
            ctx, self.config, sub_question, chunks, len(trace), phase, reread
        )
        trace.extend(updates)
        answer = await final_step(
            ctx, self.config, sub_question, sub_memory, len(trace), phase, reread
        )
        trace.append(answer)
        return answer.answer or "", sub_memory

    async def _integrate(
        self, ctx: CallContext, question: str, memory: str, sub_question: str, sub_answer: str,
        sub_memory: str, round_: int, trace: list[Step],
    ) -> str:  # fmt: skip
        """Rewrite the root memory with what the reread found (sub-memory included); a reply
        with no memory in it keeps the old memory (flagged)."""
        messages = integrate_messages(
            question, memory, sub_question, sub_answer, sub_memory, self.config.prompts
        )
        params = self.config.params(self.config.memory_tokens)
        record = await ctx.call(
            "integrate", len(trace), messages, params, phase=f"integrate-{round_}",
            reread=Reread(sub_question),
        )  # fmt: skip
        trace.append(record)
        new_memory = keep_memory(record, memory_text(record), memory)
        # The reread's notes are in the provenance already: the rewrite's notes inherit them.
        record.sources = ctx.provenance.on_integrate(memory, new_memory)
        return new_memory


def _reread_notes(trace: list[Step]) -> list[str]:
    rereads = sum(c.kind == "integrate" for c in trace)
    notes = [f"reread the document {rereads} time(s)"] if rereads else []
    if any(FORMAT_ERROR in c.flags for c in trace if c.kind == "decide"):
        notes.append("a decision reply had neither <stop/> nor <subquestion> (format error)")
    if any(REPEATED_SUBQUESTION in c.flags for c in trace):
        notes.append("the model repeated a sub-question; rereading stopped")
    if any(HISTORY_TRIMMED in c.flags for c in trace):
        notes.append("the oldest sub-questions were left out of a decision to fit the window")
    return notes
