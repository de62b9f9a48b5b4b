"""ReMemR1: a memory agent that can look back, recalling memories it wrote earlier.

ALGORITHMS.md section 2 ("Look Back to Reason Forward"). Each step's prompt holds the problem,
the recalled memory, the current memory and one section; the model replies with its reasoning,
one ``<update>new memory</update>`` and optionally one ``<recall>query</recall>``. The query is
matched against the history of earlier memories, and the best match fills the recalled slot of
the next step (or of the final call). N chunks cost N + 1 calls.

The fixes over the reference, each covered by tests:

- only the ``<update>`` body is carried forward (the reference carried the whole reply, so its
  reasoning piled up in the memory);
- the history is an ordered list with step ids, and a step retrieves *before* its own new memory
  is added, the same in evaluation and in RL, because ``rememr1_step`` is the only
  implementation of a step;
- a similarity threshold (nothing recalled when nothing matches) and top-k;
- tags are parsed case-insensitively across lines; a missing or malformed tag is flagged
  ``FORMAT_ERROR`` and the step falls back instead of failing.

History semantics: an entry is the memory a step's ``<update>`` wrote, labelled with that step.
The initial ``NO_MEMORY`` placeholder is never in it (it holds no evidence, and its words could
match a query), nor is a memory kept by the fallback (it is already there, or is the
placeholder). At step t the query searches the memories of steps before t; the memory of step
t - 1 may be found, but never step t's own, which the next prompt shows as its current memory.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..citations.focus import LEAST_SHARE, key_terms
from ..errors import UsageError
from ..llm.base import LLMBackend, Message
from ..text.chunking import Chunk
from ..text.tokenizer import Tokenizer
from ..trace import FORMAT_ERROR, FORMAT_STOPPED, LOOP_STOPPED, NOTES_RESTORED, Recall, Step
from .answer import keep_memory, memory_text, read_answer
from .base import AgentBase, CallContext, Document, ProgressCallback, Reading
from .budget import ChunkPlan, check_fits, plan_chunk
from .config import SamplingConfig
from .memagent import (
    NO_MEMORY,
    MemAgentConfig,
    answer_evidence,
    focused_reread,
    repair_answer_copy,
    run_notes,
    tidy_notes,
)
from .prompts import Prompts, render
from .recall import DEFAULT_THRESHOLD, MemoryHistory, RecallHit, TfidfHistory

# What the recalled slot shows when nothing was recalled.
NO_RECALL = "None"
# Room per recalled memory for its "[step N]" label and separator, on any tokenizer.
_RECALL_LABEL_TOKENS = 16


@dataclass
class ReMemR1Config(SamplingConfig):
    """ReMemR1 settings. Budgets are the reference's (chunk 5000, step output 2048, final 2048);
    with those, a step needs a window of about 12K tokens, and the chunk shrinks on smaller
    windows. The reference evaluates sampling at temperature 0.7, top-p 0.95; the default here
    is greedy, for reproducible runs."""

    chunk_tokens: int = 5000  # largest chunk; shrunk automatically to fit the window
    # Max new tokens of each step: reasoning, <update> and <recall> together. The carried
    # memory is part of that output, so this also caps the memory.
    memory_tokens: int = 2048
    final_tokens: int = 2048  # max new tokens of the final answer
    recall_top_k: int = 1  # memories a recall brings back (the reference: 1)
    recall_threshold: float = DEFAULT_THRESHOLD  # TF-IDF cosine below which nothing is recalled
    # longread's memory options, as memagent has them (agents/memagent.py, tidy_notes), applied
    # to each <update> before it is carried and stored for recall. Off is the paper's memory.
    # A near copy of a section's value is written as the section has it (copy_repaired).
    exact_copies: bool = False
    # Notes about the question that no section read holds are cut (notes_ungrounded): a small
    # model's made-up first note ("A special magic number for X mentioned in the provided
    # text.") is otherwise kept to the end, over the needle (sft28q's misses at 16K).
    grounded_notes: bool = False
    # A memory with no note about the question (copied filler) is cleared (notes_unrelated).
    focused_notes: bool = False
    # When a step's <update> left no note restating the question, the step is asked again
    # with only the section's sentences that restate it (memagent's focused rereads, by its
    # default rule: ``reread_rule``); the reread's <update> is carried and stored, the first
    # reply's <recall> stands. sft28q calls a section empty whose needle is glued onto the
    # end of a sentence (niah_single_2 16K, sample 3). One more call where it acts.
    focused_reread: bool = False
    # A step's reply ends where its format is complete: at a second <update> opening after a
    # closed <update> or <recall> (``FORMAT_STOPS``), whose closing tag is kept and the rest
    # cut. sft28q's malformed replies are mostly a valid reply followed by copies of it, or
    # by new blocks to the cap. Needs a backend that keeps the stop string in the text (the
    # embedded model, vLLM, SGLang). Off is the paper's: a reply runs to its end or the cap.
    format_stop: bool = False
    # A step's reply ends where it falls into a loop (one short block written again and
    # again, ``llm/loops.py``; flagged ``loop_stopped``) instead of at the cap. On held-out
    # wordings sft28q writes such loops in half its replies (``locker_expr_finally_finally``),
    # and in every one recorded the reply reads the same cut there (the same <update>, the
    # same <recall>, malformed or not): only the decoding is saved. Off is the paper's.
    loop_stop: bool = False
    # A step's reply is decoded under ``step_grammar``: one closed <update> of plain text
    # (after free text, the paper's brief thought) and at most one closed <recall>, so the
    # model can no longer open tags inside a block or write blocks after them. On held-out
    # wordings most of sft28q's malformed replies are such tag soup (``<update><memory><update>
    # <section>...``). Constrained decoding, not a learnt format: a reply with no other tag
    # decodes the same. Needs a backend that takes a grammar (the embedded model, llama.cpp's
    # server, vLLM, SGLang). Off is the paper's.
    format_grammar: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_positive("chunk_tokens", "memory_tokens", "final_tokens")
        if self.recall_top_k < 1:
            raise UsageError("recall_top_k must be at least 1")
        if not 0.0 <= self.recall_threshold <= 1.0:
            raise UsageError("recall_threshold must be a cosine between 0 and 1")

    def reread_rule(self) -> MemAgentConfig:
        """The settings memagent's ``focused_reread`` judges a step by: memagent's defaults
        (which sentences restate the question, when notes are lost, quoting what a reread
        still missed), with this memory cap."""
        return MemAgentConfig(memory_tokens=self.memory_tokens, focused_reread=True)


# --- prompts -------------------------------------------------------------------------------


def step_messages(
    question: str, recalled: str, memory: str, chunk: str, prompts: Prompts | None
) -> list[Message]:
    """One step's conversation: problem, recalled memory, current memory, section."""
    text = render(
        "rememr1_step",
        prompts,
        question=question,
        recalled=recalled or NO_RECALL,
        memory=memory,
        chunk=chunk,
    )
    return [{"role": "user", "content": text}]


def final_messages(
    question: str, recalled: str, memory: str, prompts: Prompts | None
) -> list[Message]:
    """The answer conversation: problem, recalled memory and memory; answer in \\boxed{}."""
    text = render(
        "rememr1_final",
        prompts,
        question=question,
        recalled=recalled or NO_RECALL,
        memory=memory,
    )
    return [{"role": "user", "content": text}]


def format_recalled(hits: list[RecallHit]) -> str:
    """The recalled slot's text: each hit labelled with its step, best first."""
    return "\n\n".join(f"[step {hit.step}] {hit.memory}" for hit in hits)


# --- reading the model's tags --------------------------------------------------------------


def _tag(name: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(complete ``<name>...</name>`` blocks, opening tags), lenient on case, spaces, newlines."""
    opening = rf"<\s*{name}\s*>"
    block = re.compile(rf"{opening}(.*?)<\s*/\s*{name}\s*>", re.DOTALL | re.IGNORECASE)
    return block, re.compile(opening, re.IGNORECASE)


_UPDATE, _UPDATE_OPEN = _tag("update")
_RECALL, _RECALL_OPEN = _tag("recall")
_STRAY_TAG = re.compile(r"<\s*/?\s*(?:update|recall)\s*>", re.IGNORECASE)
# Where a step's reply is complete (``format_stop``): a block closed, then another <update>
# opened, as the replies that ran on wrote it (directly, or after a space or line breaks).
FORMAT_STOPS = tuple(
    f"</{tag}>{gap}<update>" for tag in ("update", "recall") for gap in ("", " ", "\n", "\n\n")
)


def step_grammar(format_stop: bool) -> str:
    """The GBNF grammar of a well-formed step reply (``parse_step_reply``): free text without
    tags, one non-empty ``<update>`` and at most one ``<recall>``, neither holding a tag, and
    the end of the reply. Under it, greedy decoding writes a reply with no other ``<`` as
    without it, but for text after its blocks (which the reading ignores and the grammar
    ends); one with other tags inside a block (``<memory>``) gets plain text there instead.

    With ``format_stop`` the grammar lets a second ``<update>`` open after the last block, so
    that the format stop (``FORMAT_STOPS``) ends the reply where the model would go on, and
    the text is cut there as without the grammar; otherwise the reply must end there."""
    gap = '(" " | "\\n" | "\\n\\n")'
    rules = [
        'root ::= free "<update>" body "</update>" recall?' + (" again?" if format_stop else ""),
        "free ::= [^<]*",
        "body ::= [ \\t\\n]* [^< \\t\\n] [^<]*",
        f'recall ::= {gap}? "<recall>" body "</recall>"',
    ]
    if format_stop:
        rules.append(f'again ::= {gap}? "<update>"')
    return "\n".join(rules) + "\n"


@dataclass(frozen=True)
class StepReply:
    """What a step reply says, read leniently, and what was wrong with its format."""

    update: str | None  # the last non-empty complete <update> body; None when there is none
    recall: str | None  # the last non-empty complete <recall> query; None when there is none
    problems: tuple[str, ...]  # empty when the reply follows the format exactly

    @property
    def well_formed(self) -> bool:
        return not self.problems


def parse_step_reply(text: str) -> StepReply:
    """Read ``<update>`` and ``<recall>`` from a reply (``<think>`` already stripped).

    Well formed means exactly one non-empty, closed ``<update>`` and at most one closed
    ``<recall>`` (the format term of the RLMLR reward). Anything else is listed in ``problems``,
    and the last usable tag of each kind is still returned.
    """
    updates = [_clean(body) for body in _UPDATE.findall(text)]
    recalls = [body.strip() for body in _RECALL.findall(text)]
    problems = []
    if not _UPDATE_OPEN.search(text):
        problems.append("no <update>")
    if len(_UPDATE_OPEN.findall(text)) > len(updates):
        problems.append("unclosed <update>")
    if len(updates) > 1:
        problems.append(f"{len(updates)} <update> blocks")
    if any(not body for body in updates):
        problems.append("empty <update>")
    if len(_RECALL_OPEN.findall(text)) > len(recalls):
        problems.append("unclosed <recall>")
    if len(recalls) > 1:
        problems.append(f"{len(recalls)} <recall> blocks")
    return StepReply(_last_nonempty(updates), _last_nonempty(recalls), tuple(problems))


def cut_at_format_stop(text: str) -> str | None:
    """``text`` up to the closing tag of the format stop it ends with, or None when it ends
    with none (the reply ended by itself or at the cap)."""
    stop = next((stop for stop in FORMAT_STOPS if text.endswith(stop)), None)
    if stop is None:
        return None
    return text[: len(text) - len(stop) + stop.index(">") + 1]


def _clean(body: str) -> str:
    """An update body without recall blocks or stray tags, which would otherwise be carried
    in the memory and copied by later steps."""
    return _STRAY_TAG.sub("", _RECALL.sub("", body)).strip()


def _last_nonempty(bodies: list[str]) -> str | None:
    return next((body for body in reversed(bodies) if body), None)


# --- one step, the final call --------------------------------------------------------------


async def rememr1_step(
    ctx: CallContext,
    config: ReMemR1Config,
    question: str,
    memory: str,
    recalled: str,
    chunk: Chunk,
    step: int,
    history: MemoryHistory,
    key: frozenset[str] = frozenset(),
) -> list[Step]:
    """One ReMemR1 step over ``chunk``; the single implementation used by evaluation and RL.

    Returns the step's calls: the step, with ``memory`` (the new memory) and, when the model
    asked to recall, ``recall`` (the query, the next prompt's recalled slot, None when nothing
    scored above the threshold, and the step it came from); then, with ``focused_reread``, the
    reread where one was made, whose memory is the step's. Mutates ``history``: the recall is
    searched first, then this step's new memory is appended under ``step``.

    Without a usable ``<update>`` the previous memory is kept and flagged: the
    reply minus its tags would be mostly reasoning, the very thing the fix keeps out of the
    memory, while the previous memory is known to be well formed and within the cap. The
    memory options (``tidy_notes``; ``key``: the question's key, for grounded notes and
    rereads) act on the update before it is carried and stored: a cut note is never recalled.
    """
    prompt = StepPrompt(question, recalled, memory, chunk)
    record, reply = await _step_call(ctx, config, prompt, step, key)
    calls, last_reply = [record], reply
    if config.focused_reread:

        async def redo(shown: list[str]) -> Step:
            nonlocal last_reply
            again, last_reply = await _step_call(ctx, config, prompt, step + 1, key, shown)
            return again

        rule = config.reread_rule()
        calls += await focused_reread(
            ctx, rule, question, memory, chunk, record, step + 1, key=key, redo=redo
        )
    if reply.recall is not None:
        record.recall = await _recall(reply.recall, history, config)
    if _writes_history(calls[-1], last_reply.update):
        history.add(step, calls[-1].memory or memory)
    return calls


@dataclass(frozen=True)
class StepPrompt:
    """What a step's prompt shows, apart from the section: the problem, the recalled memory
    and the current memory; and the chunk the section comes from."""

    question: str
    recalled: str
    memory: str
    chunk: Chunk


async def _step_call(
    ctx: CallContext,
    config: ReMemR1Config,
    prompt: StepPrompt,
    step: int,
    key: frozenset[str],
    shown: list[str] | None = None,
) -> tuple[Step, StepReply]:
    """One step call and its reply, the memory options applied; showing the ``shown``
    sentences in place of the chunk's text when given (a reread; notes are traced to the
    whole chunk either way, and to a shown sentence they reword)."""
    question, memory, chunk = prompt.question, prompt.memory, prompt.chunk
    section = chunk.text if shown is None else " ".join(shown)
    messages = step_messages(question, prompt.recalled, memory, section, config.prompts)
    params = config.params(config.memory_tokens)
    if config.format_stop:
        params = replace(params, stop=FORMAT_STOPS, include_stop=True)
    if config.loop_stop:
        params = replace(params, loop_stop=True)
    if config.format_grammar:
        params = replace(params, grammar=step_grammar(config.format_stop))
    record = await ctx.call(
        "update", step, messages, params, chunk_index=chunk.index, chunk_tokens=chunk.tokens
    )
    if record.finish_reason == "loop":
        record.flags.append(LOOP_STOPPED)
    reply = parse_step_reply(_reply_text(record, config))
    if not reply.well_formed:
        record.flags.append(FORMAT_ERROR)
    keep_memory(record, reply.update, memory)
    record.sources = ctx.provenance.on_update(
        memory, record.memory or memory, chunk, question, shown or []
    )
    tidy_notes(ctx, config, question, record, key)
    return record, reply


def _reply_text(record: Step, config: ReMemR1Config) -> str:
    """The step's reply as the agent reads it: with ``format_stop``, cut after the closing
    tag where generation stopped (flagged ``format_stopped``)."""
    text = memory_text(record)
    cut = cut_at_format_stop(text) if config.format_stop else None
    if cut is None:
        return text
    record.flags.append(FORMAT_STOPPED)
    return cut


def _writes_history(last: Step, update: str | None) -> bool:
    """Whether the step's last call wrote a memory to recall: not when its reply had no
    usable ``<update>`` (the memory kept is already there), nor when the options emptied it
    (it holds nothing, as the initial placeholder) or a reread restored the memory before."""
    emptied = last.memory == NO_MEMORY and update != NO_MEMORY
    return (
        update is not None
        and bool(last.memory)
        and not emptied
        and (NOTES_RESTORED not in last.flags)
    )


async def _recall(query: str, history: MemoryHistory, config: ReMemR1Config) -> Recall:
    """Search the history for ``query``: the query and what it brought back."""
    # In a worker thread: fitting TF-IDF on a long history would stall other concurrent runs.
    hits = await asyncio.to_thread(
        history.search, query, config.recall_top_k, config.recall_threshold
    )
    if not hits:
        return Recall(query)
    return Recall(query, format_recalled(hits), hits[0].step)


async def rememr1_final(
    ctx: CallContext, config: ReMemR1Config, question: str, memory: str, recalled: str, step: int
) -> Step:
    """Answer from the memory and the recalled memory; the answer is the last \\boxed{} (else
    the whole reply, flagged ``NO_BOXED_ANSWER``). With ``exact_copies`` a value the answer
    nearly copied from them is written as they have it (flagged ``copy_repaired``)."""
    messages = final_messages(question, recalled, memory, config.prompts)
    record = await ctx.call("final", step, messages, config.params(config.final_tokens))
    read_answer(record)
    if config.exact_copies:
        repair_answer_copy(record, f"{memory}\n{recalled}")
    return record


async def read_with_recall(
    ctx: CallContext,
    config: ReMemR1Config,
    question: str,
    chunks: Sequence[Chunk],
    history: MemoryHistory,
) -> tuple[str, str, list[Step]]:
    """Every chunk in order, one step each. Returns the memory, the recalled memory for the
    final call, and the step conversations.

    Each step's recall result replaces the recalled slot, and a step that asks for nothing
    empties it: the slot shows what the model asked for last, not a stale recall it may have
    already folded into its memory.
    """
    memory, recalled = NO_MEMORY, ""
    steps: list[Step] = []
    key = rememr1_key(config, question, chunks)
    for chunk in chunks:
        calls = await rememr1_step(
            ctx, config, question, memory, recalled, chunk, len(steps), history, key
        )
        memory = calls[-1].memory or memory
        recall = calls[0].recall
        recalled = (recall.memory if recall else None) or ""
        steps += calls
    return memory, recalled, steps


def rememr1_key(config: ReMemR1Config, question: str, chunks: Sequence[Chunk]) -> frozenset[str]:
    """With grounded notes or focused rereads, the terms of ``question`` that set its best
    match in ``chunks`` apart from rivals sharing its frame (``key_terms``, as memagent's
    ``question_key``): a note giving the key another key's number is cut, and another key's
    needle is never shown as restating the question. Empty otherwise."""
    if not (config.grounded_notes or config.focused_reread):
        return frozenset()
    return key_terms((chunk.text for chunk in chunks), question, LEAST_SHARE)


# --- budget and the agent ------------------------------------------------------------------


def plan_rememr1_chunk(
    tokenizer: Tokenizer, window: int | None, config: ReMemR1Config, question: str
) -> ChunkPlan:
    """Chunk size so that every step (template + question + recalled + memory + chunk + step
    output) and the final call fit the window. A memory is an ``<update>`` body, part of one
    step output, so it is at most ``memory_tokens`` long; a recall brings back ``recall_top_k``
    such memories plus labels."""
    memory_room = max(config.memory_tokens, tokenizer.count(NO_MEMORY))
    recalled_room = config.recall_top_k * (config.memory_tokens + _RECALL_LABEL_TOKENS)
    recalled_room = max(recalled_room, tokenizer.count(NO_RECALL))
    empty_step = step_messages(question, "", "", "", config.prompts)[0]["content"]
    plan = plan_chunk(
        window=window,
        requested=config.chunk_tokens,
        prompt_tokens_without_chunk=tokenizer.count(empty_step) + recalled_room + memory_room,
        max_new_tokens=config.memory_tokens,
    )
    empty_final = final_messages(question, "", "", config.prompts)[0]["content"]
    check_fits(
        window=window,
        prompt_tokens=tokenizer.count(empty_final) + recalled_room + memory_room,
        max_new_tokens=config.final_tokens,
        what="final answer",
    )
    return plan


class ReMemR1(AgentBase[ReMemR1Config]):
    """The ReMemR1 reader. ``run = await ReMemR1(backend, tokenizer).run(question, document)``.

    ``new_history`` makes the memory history of each run; pass another ``MemoryHistory``
    factory to try a different retriever.
    """

    name = "rememr1"
    config_class = ReMemR1Config

    def __init__(
        self,
        backend: LLMBackend,
        tokenizer: Tokenizer,
        config: ReMemR1Config | None = None,
        progress: ProgressCallback | None = None,
        new_history: Callable[[], MemoryHistory] = TfidfHistory,
        **options: Any,
    ) -> None:
        super().__init__(backend, tokenizer, config, progress, **options)
        self.new_history = new_history

    def plan(self, question: str) -> ChunkPlan:
        """The chunk size this agent will use for ``question`` on its backend's window."""
        return plan_rememr1_chunk(
            self.tokenizer, self.backend.context_window, self.config, question
        )

    async def read(self, ctx: CallContext, question: str, document: Document) -> Reading:
        """Read ``document`` step by step, then answer ``question`` from the memories."""
        plan, chunks = await self.chunks(question, document)
        ctx.expected_calls = len(chunks) + 1
        memory, recalled, steps = await read_with_recall(
            ctx, self.config, question, chunks, self.new_history()
        )
        steps.append(await rememr1_final(ctx, self.config, question, memory, recalled, len(steps)))
        notes = rememr1_notes(plan, steps, self.config.memory_tokens)
        # The final call reads the recalled memories too: their notes may hold the answer.
        evidence = answer_evidence(ctx, steps[-1], question, f"{memory}\n{recalled}", chunks)
        return Reading(steps, {"chunk_tokens_used": plan.chunk_tokens}, notes, evidence)


def rememr1_notes(plan: ChunkPlan, steps: list[Step], memory_cap: int) -> list[str]:
    """MemAgent's notes (shrunk chunk, cut memories), plus format errors and recall use."""
    notes = run_notes(plan, steps, memory_cap)
    malformed = sum(FORMAT_ERROR in s.flags for s in steps)
    if malformed:
        notes.append(f"{malformed} step(s) broke the <update>/<recall> format; see the flags")
    asked = [s.recall for s in steps if s.recall is not None]
    if asked:
        found = sum(r.memory is not None for r in asked)
        notes.append(f"{len(asked)} recall(s) asked, {found} found an earlier memory")
    return notes
