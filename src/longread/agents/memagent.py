"""MemAgent: read chunk by chunk, rewriting a bounded memory; answer from the memory alone.

ALGORITHMS.md section 1 (Yu et al. 2025). N chunks cost N + 1 calls, each fitting a fixed window
however long the document is. ``update_step`` and ``final_step`` are the single implementation
of a MemAgent turn: evaluation, serving, MemReread's passes and RL rollouts all call them.
``MemAgent.run_many`` reads one document for several questions in a single chunk-major pass
(``read_chunk_major``; agents/multi.py says why).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..citations import Evidence, memory_evidence
from ..citations.copies import exact_answer_copy, exact_copies
from ..citations.focus import (
    LEAST_SHARE,
    Cited,
    Restating,
    asks,
    focus_sentences,
    key_terms,
    lost_notes,
    notes_about,
    restates,
)
from ..citations.grounding import exit_grounded, unrelated_notes, without_ungrounded
from ..errors import UsageError
from ..llm.base import Message
from ..text.chunking import Chunk
from ..text.tokenizer import Tokenizer
from ..trace import (
    COPY_REPAIRED,
    FOCUS_QUOTED,
    FOCUSED_REREAD,
    FORMAT_ERROR,
    GATE_EXIT,
    GATE_EXIT_EARLY,
    GATE_EXIT_UNGROUNDED,
    GATE_KEEP,
    MEMORY_KEPT,
    MEMORY_TRUNCATED,
    NOTES_RESTORED,
    NOTES_UNGROUNDED,
    NOTES_UNRELATED,
    Reread,
    Step,
)
from .answer import keep_memory, memory_text, read_answer
from .base import CallContext, Document, Reading, prepare_chunks
from .budget import ChunkPlan, check_fits, plan_chunk
from .config import SamplingConfig
from .gates import read_gates
from .multi import MultiQuestionAgent
from .prompts import Prompts, render

NO_MEMORY = "No previous memory"


@dataclass
class MemAgentConfig(SamplingConfig):
    """MemAgent settings; defaults are the paper's (chunk 5000, memory 1024, final 1024).
    Prompt files: memagent_update.txt (memagent_update_section_first.txt with
    ``section_first``), memagent_final.txt."""

    chunk_tokens: int = 5000  # largest chunk; shrunk automatically to fit the window
    memory_tokens: int = 1024  # max new tokens of each memory rewrite (the memory cap)
    final_tokens: int = 1024  # max new tokens of the final answer
    # Put the section before the problem and the memory in the update prompt (the paper puts
    # it last). Calls that read the same chunk for different questions then share a long
    # prompt prefix, which a prefix cache (the embedded model's kept state, vLLM's automatic
    # prefix caching) computes once: see ``MemAgent.run_many`` (agents/multi.py).
    section_first: bool = False
    # Text-controlled gates (issue 29, agents/gates.py); off is the papers' behaviour.
    update_gate: bool = False  # a reply may be <keep/>: the memory stays, unwritten
    exit_gate: bool = False  # a reply may end with <exit/>: stop reading, answer
    # Whether the update prompt explains the gates that are on (agents/gates.py). Off, the
    # prompt is the papers' and the tags are known only to an adapter trained to write them:
    # a 135M model trained under the explained prompt copied the tags and stopped reading
    # (issue 29, stages sft29g/sft29h), while the papers' prompt kept its reading.
    gate_instructions: bool = True
    # The exit probe: after each update that changed the memory, a short call of its own
    # (memagent_exit_probe.txt: problem and memory, no section) asks whether the memory
    # answers the problem; "yes" stops reading as <exit/> does. The update replies stay the
    # papers': a 135M model trained to end them with a tag learnt to write tags everywhere
    # (issue 29, stages sft29g-sft29i). Costs a probe per change of memory, not per chunk.
    exit_probe: bool = False
    probe_tokens: int = 4  # max new tokens of a probe reply ("yes" / "no")
    # Honour an exit (<exit/> or the probe's yes) only when the notes about the question are
    # traced to the sections read (citations/grounding.py): a gate that sees only the notes
    # cannot tell a copied answer from a made-up one. Off is the papers' gate (GRU-Mem).
    grounded_exit: bool = False
    # Cut from each update's memory the notes about the question that no section read holds
    # (citations/grounding.py; flagged notes_ungrounded): a made-up answer written before the
    # evidence is otherwise kept to the end by a small model. Off is the papers' memory.
    grounded_notes: bool = False
    # Clear each update's memory when none of its notes is about the question (shares none
    # of its terms; flagged notes_unrelated): copied filler that a small model keeps to the
    # end, so the evidence is never taken in. Off is the papers' memory.
    focused_notes: bool = False
    # Replace a value an update's notes about the question nearly copied from the section
    # (a UUID with characters dropped; citations/copies.py; flagged copy_repaired) by the
    # section's, before grounded notes judge them: a small model's miscopy is otherwise cut
    # or kept wrong. Off is the papers' memory.
    exact_copies: bool = False
    # When an update left no note about the question (it copied filler, or wrote the empty
    # memory), show the update prompt once more with only the section's sentences that share
    # the most of the question's terms, at least two and at least reread_least_share of them
    # (citations/focus.py; flagged focused_reread); it acts too after an update that gave up a
    # note restating the question, and keeps the memory before when the notes left do not
    # restate it (flagged notes_restored; keep_notes_share). A small model copies prose over
    # a needle worded unlike its training, and keeps the needle when shown it alone. Off is
    # the papers' memory.
    focused_reread: bool = False
    # A needle restates its question; a multi-hop question's distractors share a few of its
    # terms (citations/focus.py LEAST_SHARE). 0 is stop 53's rule (two terms are enough).
    reread_least_share: float = LEAST_SHARE
    # With focused rereads, the memory kept against an update is one whose note restates the
    # question (this share of its terms) when the update's notes do not (citations/focus.py
    # lost_notes). 0 is stop 53's rule, one shared term: prose sharing "number" then replaced
    # a noted needle, and filler sharing a key's word was kept against focused notes.
    keep_notes_share: float = LEAST_SHARE
    # With focused rereads, notes are judged by the sentences they cite: a reread's note that
    # rewords a sentence it was shown is traced to it when it claims only what it says (its
    # numbers and names; citations/align.py shown_match), and a note counts as restating the
    # question when its cited sentence does (citations/focus.py restates). The adapter
    # rewords a needle worded unlike its training ("To turn the dial to N, you must turn it
    # to N."), too far for the fuzzy alignment: grounded notes then cut it (stop 54's locker
    # wording: 9 of its 12 misses), and once traced, a later update's filler replaced it
    # unopposed. False is stop 54's rule.
    reread_cites: bool = True
    # With focused rereads, reread after any update that left no note restating the question
    # (keep_notes_share of its terms), not only after one that left no note about it: prose
    # sharing one of its words ("must") otherwise passes for notes about it at the needle's
    # section (stop 54's locker wording: 3 of its 12 misses). No call is made unless a
    # sentence of the section restates the question. False is stop 54's rule.
    reread_unrestated: bool = True
    # With focused rereads, when the reread's notes do not restate the question either, put
    # the sentences it was shown at the head of the memory, as the section has them (flagged
    # focus_quoted; whole notes of the reread's memory follow as far as memory_tokens allows),
    # and never count a note that is a question as restating it. The adapter shown a needle
    # worded unlike its training wrote the question back, kept the copied filler of the
    # memory it was shown, or wrote the value alone ("At 3550955.", too short to be a note):
    # 7 of stop 55's 7 misses on the held-out greenhouse wording. False is stop 55's rule.
    reread_quotes: bool = True
    # Know the question's key (citations/focus.py key_terms): the terms the document's best
    # match holds and another sentence sharing the question's frame lacks. With focused
    # rereads, a sentence or note restates the question only when it holds the key as well;
    # with grounded notes, a note naming the key is held only by text naming it too. Another
    # key's needle shares "special magic number", 3 of 4 terms: rereads showed it, notes kept
    # it, and the adapter wrote the question's key with its number; every wrong answer of
    # bench/multi_question.py was another key's number (stop 57). With one match in the
    # document, or matches alike, nothing changes. False is stop 57's rule.
    question_keys: bool = True
    # With grounded_exit and the question's key (question_keys): an exit needs every note
    # about the question to name the key. Another key's needle, copied, is traced and shares
    # the question's frame: the shipped probe said yes to it and stopped niah_multikey_2 8K at
    # the first rival needle (95% -> 15%, stop 70). False is stop 69's grounded exit.
    keyed_exit: bool = True
    # With grounded_exit: an exit needs a note restating the question (citations/focus.py
    # restates: 60% of its terms, the key among them; a question written back does not
    # count). The grounded exit's "about the question" is one shared term: the probe said yes
    # to copied filler sharing "number" with a held-out question and the exit was honoured
    # (stop 70). Every exit the committed probe cells took restated its question
    # (recipes/smollm2/exit_restates.py). False is stop 70's first exit.
    restated_exit: bool = True
    min_read: float = 0.0  # share of the chunks read before an exit is honoured

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_positive("chunk_tokens", "memory_tokens", "final_tokens", "probe_tokens")
        if not 0.0 <= self.min_read <= 1.0:
            raise UsageError("min_read is a share of the document: between 0 and 1")
        for name in ("reread_least_share", "keep_notes_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise UsageError(f"{name} is a share of the question's terms: 0 to 1")


# The earlier forms of focused rereads, each by the stop whose rule it was: the settings that
# give it back (recipes/smollm2/earlier_rule.py runs ablations with them; the README's
# --focused-reread row says what each lost).
EARLIER_REREAD_RULES: dict[str, dict[str, object]] = {
    "stop53": {  # two shared terms were enough, and notes were kept only against none
        "reread_least_share": 0.0,
        "keep_notes_share": 0.0,
        "reread_cites": False,
        "reread_unrestated": False,
        "reread_quotes": False,
        "question_keys": False,
    },
    "stop54": {  # notes judged by their own words; a reread only after no note about it
        "reread_cites": False,
        "reread_unrestated": False,
        "reread_quotes": False,
        "question_keys": False,
    },
    "stop55": {"reread_quotes": False, "question_keys": False},  # nothing quoted
    "stop57": {"question_keys": False},  # another key's needle restates the question
}


# The settings that act only while one of these options is on: a run with the options off
# reads the same whatever they say (eval/report.py labels runs by the settings that change
# what they did).
ACTS_ONLY_WITH: dict[str, tuple[str, ...]] = {
    "reread_least_share": ("focused_reread",),
    "keep_notes_share": ("focused_reread",),
    "reread_cites": ("focused_reread",),
    "reread_unrestated": ("focused_reread",),
    "reread_quotes": ("focused_reread",),
    "question_keys": ("focused_reread", "grounded_notes"),
    "probe_tokens": ("exit_probe",),
    "keyed_exit": ("grounded_exit",),
    "restated_exit": ("grounded_exit",),
}


class NoteOptions(Protocol):
    """The memory options an agent applies after each update (``tidy_notes``): memagent's and
    memreread's config, and ReMemR1's."""

    exact_copies: bool
    grounded_notes: bool
    focused_notes: bool


class UpdateLayout(Protocol):
    """How an update prompt is laid out. ``MemAgentConfig`` carries one, and so does the
    oracle's ``Reading`` (train/oracle.py), so that training writes the agent's own prompts."""

    # Read-only properties: the oracle's Reading is a frozen dataclass.
    @property
    def section_first(self) -> bool: ...  # the section before the problem and the memory
    @property
    def update_gate(self) -> bool: ...  # the <keep/> gate is on
    @property
    def exit_gate(self) -> bool: ...  # the <exit/> gate is on
    @property
    def gate_instructions(self) -> bool: ...  # the prompt explains the gates that are on


def update_messages(
    question: str,
    memory: str,
    chunk: str,
    prompts: Prompts | None,
    layout: UpdateLayout | None = None,
) -> list[Message]:
    """The memory-rewrite conversation: problem, memory, section, instruction (the paper's
    order), or with ``layout.section_first`` the section, then problem, memory and
    instruction; each gate that is on adds its sentence at the end (agents/gates.py), unless
    ``layout.gate_instructions`` is off (the gates then read tags the prompt never names).
    No ``layout`` is the papers' prompt."""
    layout = layout or MemAgentConfig()
    name = "memagent_update_section_first" if layout.section_first else "memagent_update"
    text = render(name, prompts, question=question, memory=memory, chunk=chunk)
    switches = (
        ("memagent_update_gate", layout.update_gate),
        ("memagent_exit_gate", layout.exit_gate),
    )
    gates = [gate for gate, on in switches if on and layout.gate_instructions]
    if gates:  # off, the prompt is the paper's to the byte
        lines = [text.rstrip("\n"), *(render(g, prompts).rstrip("\n") for g in gates)]
        text = "\n\n".join(lines) + "\n"
    return [{"role": "user", "content": text}]


def probe_messages(question: str, memory: str, prompts: Prompts | None) -> list[Message]:
    """The exit probe's conversation: problem and memory, a yes/no question (no section)."""
    text = render("memagent_exit_probe", prompts, question=question, memory=memory)
    return [{"role": "user", "content": text}]


def final_messages(question: str, memory: str, prompts: Prompts | None) -> list[Message]:
    """The answer conversation: problem and memory only, answer in \\boxed{}."""
    text = render("memagent_final", prompts, question=question, memory=memory)
    return [{"role": "user", "content": text}]


async def update_step(
    ctx: CallContext,
    config: MemAgentConfig,
    question: str,
    memory: str,
    chunk: Chunk,
    step: int,
    phase: str = "",
    reread: Reread | None = None,
    shown: list[str] | None = None,
    key: frozenset[str] = frozenset(),
) -> Step:
    """One MemAgent turn: the reply (minus any <think>) replaces the memory; a reply with no
    memory in it keeps the old one (flagged). Under the gates (agents/gates.py) a ``<keep/>``
    keeps it too and an ending ``<exit/>`` is flagged for the reading loop to stop. The
    prompt shows the ``shown`` sentences in place of the chunk's text when given (a focused
    reread); notes are traced to the whole chunk either way, and with
    ``reread_cites`` to a shown sentence they reword. ``key``: the question's key in the
    document (``question_key``), for grounded notes."""
    section = chunk.text if shown is None else " ".join(shown)
    messages = update_messages(question, memory, section, config.prompts, config)
    record = await ctx.call(
        "update",
        step,
        messages,
        config.params(config.memory_tokens),
        chunk_index=chunk.index,
        chunk_tokens=chunk.tokens,
        phase=phase,
        reread=reread,
    )
    text = memory_text(record)
    if config.update_gate or config.exit_gate:
        gate = read_gates(text, config.update_gate, config.exit_gate)
        record.flags += [
            flag for flag, on in ((GATE_EXIT, gate.exit), (FORMAT_ERROR, gate.misplaced)) if on
        ]
        if gate.memory is None:
            record.memory = memory
            record.flags.append(GATE_KEEP)
        else:
            keep_memory(record, gate.memory, memory)
    else:
        keep_memory(record, text, memory)
    anchors = shown if shown is not None and config.reread_cites else []
    record.sources = ctx.provenance.on_update(
        memory, record.memory or memory, chunk, question, anchors
    )
    tidy_notes(ctx, config, question, record, key)
    return record


def tidy_notes(
    ctx: CallContext,
    config: NoteOptions,
    question: str,
    record: Step,
    key: frozenset[str] = frozenset(),
) -> None:
    """The memory options after an update wrote ``record``'s memory, in this order: near
    copies repaired (``exact_copies``), then notes no section read holds cut
    (``grounded_notes``), then a memory with no note about ``question`` cleared
    (``focused_notes``)."""
    if config.exact_copies:
        repair_near_copies(ctx, question, record)
    if config.grounded_notes:
        cut_ungrounded_notes(ctx, question, record, key)
    if config.focused_notes:
        clear_unrelated_notes(question, record)


def repair_near_copies(ctx: CallContext, question: str, record: Step) -> None:
    """Write into the memory ``record`` leaves the source's value for each value its notes
    about ``question`` nearly copied (flagged ``copy_repaired``)."""
    repaired, fixes = exact_copies(record.memory or "", question, ctx.provenance)
    if fixes:
        record.memory = repaired
        record.flags.append(COPY_REPAIRED)


def cut_ungrounded_notes(
    ctx: CallContext, question: str, record: Step, key: frozenset[str] = frozenset()
) -> None:
    """Cut from the memory ``record`` leaves its notes about ``question`` that the sections
    read do not hold (flagged ``notes_ungrounded``); none left is an empty memory. A note
    naming a ``key`` term is held only by text naming it too."""
    kept, cut = without_ungrounded(record.memory or "", question, ctx.provenance, key)
    if cut:
        record.memory = kept or NO_MEMORY
        record.flags.append(NOTES_UNGROUNDED)


def clear_unrelated_notes(question: str, record: Step) -> None:
    """Empty the memory ``record`` leaves when none of its notes is about ``question``
    (flagged ``notes_unrelated``)."""
    memory = record.memory or NO_MEMORY
    if memory != NO_MEMORY and unrelated_notes(memory, question):
        record.memory = NO_MEMORY
        record.flags.append(NOTES_UNRELATED)


async def probe_step(
    ctx: CallContext,
    config: MemAgentConfig,
    question: str,
    update: Step,
    step: int,
    phase: str = "",
    reread: Reread | None = None,
) -> Step:
    """The exit probe after ``update`` (which changed the memory): "yes" flags ``gate_exit``
    (the reading loop stops, as after <exit/>), "no" reads on; any other reply is flagged
    ``format_error`` and reads on. The step keeps the update's chunk, so notes and the
    viewer say where reading stopped."""
    messages = probe_messages(question, update.memory or NO_MEMORY, config.prompts)
    record = await ctx.call(
        "probe", step, messages, config.params(config.probe_tokens),
        chunk_index=update.chunk_index, phase=phase, reread=reread,
    )  # fmt: skip
    answer = probe_answer(record.reply or "")
    if answer is None:
        record.flags.append(FORMAT_ERROR)
    elif answer:
        record.flags.append(GATE_EXIT)
    return record


def probe_answer(reply: str) -> bool | None:
    """A probe reply read strictly: True for yes, False for no (its first word, any case,
    punctuation around it ignored), None for anything else."""
    words = reply.strip().split(maxsplit=1)
    first = words[0].strip(".,!:;\"'*").lower() if words else ""
    return {"yes": True, "no": False}.get(first)


async def update_and_probe(
    ctx: CallContext,
    config: MemAgentConfig,
    question: str,
    memory: str,
    chunk: Chunk,
    step: int,
    phase: str = "",
    reread: Reread | None = None,
    key: frozenset[str] = frozenset(),
) -> tuple[str, list[Step]]:
    """One chunk's calls and the memory they leave: the update, then with ``exit_probe`` the
    probe when the update changed the memory (an unchanged memory cannot answer what it did
    not before). The memory is read before the probe's call: a sink sheds the update's text
    once the next call starts (``CallContext.flush``). With ``grounded_exit`` an exit whose
    notes are not traced to the sections read is refused (``refuse_ungrounded_exit``).
    ``key``: the question's key in the document (``question_key``), for focused rereads and
    the grounded exit."""
    update = await update_step(ctx, config, question, memory, chunk, step, phase, reread, key=key)
    calls = [update]
    if config.focused_reread:
        calls += await focused_reread(
            ctx, config, question, memory, chunk, update, step + 1, phase, reread, key
        )
    new_memory = calls[-1].memory or memory
    # no probe after an unchanged memory or an <exit/>
    if config.exit_probe and new_memory != memory and GATE_EXIT not in calls[-1].flags:
        last = calls[-1]  # the reread's memory, where there was one
        calls.append(
            await probe_step(ctx, config, question, last, step + len(calls), phase, reread)
        )
    if config.grounded_exit:
        exit_key = key if config.keyed_exit else frozenset()
        # a one-term question ("What is the code?") is restated by a note holding that term
        restating = Restating(question, key=exit_key, skip_questions=True, least=1)
        refuse_ungrounded_exit(
            ctx,
            question,
            new_memory,
            calls[-1],
            exit_key,
            restating if config.restated_exit else None,
        )
    return new_memory, calls


def missed_question(config: MemAgentConfig, rule: Restating, memory: str, update: Step) -> bool:
    """Whether ``update``, read onto ``memory``, left no note about the question (with
    ``reread_unrestated``: none restating it by ``rule``) or gave up a note restating it
    (``lost_notes``): where ``focused_reread`` acts. An exit never."""
    after = update.memory or NO_MEMORY
    if GATE_EXIT in update.flags:
        return False
    if config.reread_unrestated and not restates(after, rule):
        return True
    return not notes_about(after, rule.question) or lost_notes(memory, after, rule)


def restating(
    ctx: CallContext, config: MemAgentConfig, question: str, key: frozenset[str] = frozenset()
) -> Restating:
    """When a note restates ``question`` in this run: ``keep_notes_share`` of its terms and
    the question's ``key`` (``question_key``); with ``reread_cites``, a note's cited sentence
    counts too (the text each note was traced to); with ``reread_quotes``, a question never
    counts."""

    def cited(note: str) -> str | None:
        return span.quote if (span := ctx.provenance.span_of(note)) else None

    quotes: Cited | None = cited if config.reread_cites else None
    return Restating(question, config.keep_notes_share, quotes, config.reread_quotes, key)


# Another agent's update call for a focused reread: the sentences to show, the call it made.
Redo = Callable[[list[str]], Awaitable[Step]]


async def focused_reread(
    ctx: CallContext,
    config: MemAgentConfig,
    question: str,
    memory: str,
    chunk: Chunk,
    update: Step,
    step: int,
    phase: str = "",
    reread: Reread | None = None,
    key: frozenset[str] = frozenset(),
    redo: Redo | None = None,
) -> list[Step]:
    """With ``focused_reread``, after ``update`` (which read ``chunk`` onto ``memory``) left
    no note about ``question`` (or none restating it) or gave up a note restating it
    (``missed_question``): the update again, its prompt showing only the chunk's sentences
    that share the most of the question's terms (``focus_sentences``; none, no call); then,
    when the last of these calls gave up ``memory``'s notes restating the question too,
    ``memory`` is kept (flagged ``notes_restored``). With ``reread_quotes``, a reread whose
    notes do not restate the question either gets the sentences it was shown at the head of
    its memory (``quote_focus``). With a ``key`` (``question_key``), only sentences and
    notes that hold it restate the question. ``redo`` makes the second call from the shown
    sentences (ReMemR1's step); by default it is memagent's ``update_step``. The added
    calls."""
    rule = restating(ctx, config, question, key)
    if not missed_question(config, rule, memory, update):
        return []
    calls: list[Step] = []
    focus = focus_sentences(chunk.text, question, least_share=config.reread_least_share, key=key)
    if focus:
        if redo is None:
            second = await update_step(
                ctx, config, question, memory, chunk, step, phase, reread, shown=focus, key=key
            )
        else:
            second = await redo(focus)
        second.flags.append(FOCUSED_REREAD)
        # with reread_quotes, the rule already skips a note that is a question
        if config.reread_quotes and not restates(second.memory or NO_MEMORY, rule):
            await quote_focus(ctx, config, question, chunk, second, focus)
        calls.append(second)
    last = calls[-1] if calls else update
    if lost_notes(memory, last.memory or NO_MEMORY, rule):
        last.memory = memory
        last.flags.append(NOTES_RESTORED)
    return calls


async def quote_focus(
    ctx: CallContext,
    config: MemAgentConfig,
    question: str,
    chunk: Chunk,
    record: Step,
    focus: list[str],
) -> None:
    """Put the ``focus`` sentences of ``chunk``, as they stand, at the head of the memory
    ``record`` (a reread) leaves, each on a line of its own, followed by the lines of its
    memory that are not questions while the whole stays within ``memory_tokens``; traced
    to the sentences they are (flagged ``focus_quoted``). Nothing changes when not even the
    first sentence fits."""
    before = record.memory or NO_MEMORY
    notes = [] if before == NO_MEMORY else before.splitlines()
    lines: list[str] = []
    for line in [*focus, *(n for n in notes if n.strip() and not asks(n))]:
        text = "\n".join([*lines, line])
        if await ctx.count_prompt([{"role": "user", "content": text}]) > config.memory_tokens:
            break
        lines.append(line)
    if not lines:
        return
    record.memory = "\n".join(lines)
    quoted = ctx.provenance.on_update(before, record.memory, chunk, question, focus)
    record.sources = [*(record.sources or []), *quoted]
    record.flags.append(FOCUS_QUOTED)


def refuse_ungrounded_exit(
    ctx: CallContext,
    question: str,
    memory: str,
    record: Step,
    key: frozenset[str] = frozenset(),
    restating: Restating | None = None,
) -> None:
    """Turn ``record``'s exit into ``gate_exit_ungrounded`` (reading goes on) when the notes
    of ``memory`` about ``question`` are not all traced to the sections read, or, given the
    question's ``key`` (``question_key``), not all name it, or, given ``restating``, none of
    them restates the question."""
    if GATE_EXIT not in record.flags:
        return
    grounded = exit_grounded(memory, question, ctx.provenance, key)
    if not grounded or (restating is not None and not restates(memory, restating)):
        record.flags.remove(GATE_EXIT)
        record.flags.append(GATE_EXIT_UNGROUNDED)


def stops_here(record: Step, config: MemAgentConfig, read: int, chunks: int) -> bool:
    """Whether reading stops after this step: an update whose reply ended with ``<exit/>``,
    or a probe that said yes, and at least ``min_read`` of the ``chunks`` are read (``read``
    of them); an exit before that is flagged and reading goes on."""
    if GATE_EXIT not in record.flags:
        return False
    if read >= config.min_read * chunks:
        return True
    record.flags.remove(GATE_EXIT)
    record.flags.append(GATE_EXIT_EARLY)
    return False


async def final_step(
    ctx: CallContext,
    config: MemAgentConfig,
    question: str,
    memory: str,
    step: int,
    phase: str = "",
    reread: Reread | None = None,
) -> Step:
    """Answer from memory; the answer is the last \\boxed{} (else the whole reply, flagged).
    With ``exact_copies`` a value the answer nearly copied from the memory is written as the
    memory has it (flagged ``copy_repaired``; the reply stays as the model wrote it)."""
    messages = final_messages(question, memory, config.prompts)
    params = config.params(config.final_tokens)
    record = await ctx.call("final", step, messages, params, phase=phase, reread=reread)
    read_answer(record)
    if config.exact_copies:
        repair_answer_copy(record, memory)
    return record


def repair_answer_copy(record: Step, source: str) -> None:
    """Write a value ``record``'s answer nearly copied from ``source`` (the memory it was read
    from) as ``source`` has it (flagged ``copy_repaired``; the reply stays as written)."""
    if record.answer:
        record.answer, fixes = exact_answer_copy(record.answer, source)
        if fixes:
            record.flags.append(COPY_REPAIRED)


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
    # The gates' sentences, when on and explained, are part of every update prompt too.
    empty_update = update_messages(question, "", "", config.prompts, config)[0]["content"]
    plan = plan_chunk(
        window=window,
        requested=config.chunk_tokens,
        prompt_tokens_without_chunk=tokenizer.count(empty_update) + memory_room,
        max_new_tokens=config.memory_tokens,
    )
    final_prompt = tokenizer.count(final_messages(question, "", config.prompts)[0]["content"])
    check_fits(
        window=window,
        prompt_tokens=final_prompt + memory_room,
        max_new_tokens=config.final_tokens,
        what="final answer",
    )
    return plan


class MemAgent(MultiQuestionAgent[MemAgentConfig]):
    """The MemAgent reader. ``run = await MemAgent(backend, tokenizer).run(question, document)``;
    ``runs = await agent.run_many(questions, document)`` reads once for several questions."""

    name = "memagent"

    config_class = MemAgentConfig
    # The memory the first update reads. Training sets it per rollout to start from a memory
    # state sampled along a long document (state-reset episodes, longread.train.rollouts).
    start_memory: str = NO_MEMORY

    def plan(self, question: str) -> ChunkPlan:
        """The chunk size this agent will use for ``question`` on its backend's window."""
        return plan_memagent_chunk(
            self.tokenizer, self.backend.context_window, self.config, question
        )

    async def read(self, ctx: CallContext, question: str, document: Document) -> Reading:
        plan, chunks = await self.chunks(question, document)
        ctx.expected_calls = len(chunks) + 1
        memory, steps = await read_with_memory(
            ctx, self.config, question, chunks, memory=self.start_memory
        )
        steps.append(await final_step(ctx, self.config, question, memory, len(steps)))
        notes = run_notes(plan, steps, self.config.memory_tokens)
        evidence = answer_evidence(ctx, steps[-1], question, memory, chunks)
        used = {"chunk_tokens_used": plan.chunk_tokens, **read_share(self.config, steps, chunks)}
        return Reading(steps, used, notes, evidence)

    @property
    def shares_prefix(self) -> bool:
        return self.config.section_first

    def plan_many(self, questions: Sequence[str]) -> ChunkPlan:
        """The smallest of the questions' plans: every call fits, and the document is cut
        once (to the size each question gets alone unless a long one needs smaller)."""
        return min((self.plan(q) for q in questions), key=lambda plan: plan.chunk_tokens)

    async def read_many(
        self, contexts: Sequence[CallContext], questions: Sequence[str], document: Document
    ) -> list[Reading]:
        """Every question's MemAgent pass in lockstep (see ``read_chunk_major``), then the
        final answers in question order."""
        plan = self.plan_many(questions)
        chunks = await prepare_chunks(document, self.tokenizer, plan.chunk_tokens)
        for ctx in contexts:  # progress shows the whole pass: every question's calls
            ctx.expected_calls = len(questions) * (len(chunks) + 1)
        passes = await read_chunk_major(contexts, self.config, questions, chunks)
        readings = []
        for ctx, question, (memory, steps) in zip(contexts, questions, passes, strict=True):
            steps.append(await final_step(ctx, self.config, question, memory, len(steps)))
            notes = run_notes(plan, steps, self.config.memory_tokens)
            evidence = answer_evidence(ctx, steps[-1], question, memory, chunks)
            used = {
                "chunk_tokens_used": plan.chunk_tokens,
                **read_share(self.config, steps, chunks),
            }
            readings.append(Reading(steps, used, notes, evidence))
        return readings


def answer_evidence(
    ctx: CallContext, final: Step, question: str, memory: str, chunks: Sequence[Chunk]
) -> Evidence:
    """The spans of the document that hold the final step's answer, traced through the notes
    of ``memory`` (the memory the answer was read from)."""
    return memory_evidence(final.answer or "", question, memory, ctx.provenance, chunks)


async def read_with_memory(
    ctx: CallContext,
    config: MemAgentConfig,
    question: str,
    chunks: Sequence[Chunk],
    first_step: int = 0,
    phase: str = "",
    reread: Reread | None = None,
    memory: str = NO_MEMORY,
) -> tuple[str, list[Step]]:
    """The MemAgent pass: fold every chunk into ``memory`` (empty: ``NO_MEMORY``), in order.
    Returns the memory and the update steps."""
    steps: list[Step] = []
    key = question_key(config, question, chunks)
    for offset, chunk in enumerate(chunks):
        memory, calls = await update_and_probe(
            ctx, config, question, memory, chunk, first_step + len(steps), phase, reread, key
        )
        steps += calls
        if stops_here(calls[-1], config, offset + 1, len(chunks)):
            break
    return memory, steps


async def read_chunk_major(
    contexts: Sequence[CallContext],
    config: MemAgentConfig,
    questions: Sequence[str],
    chunks: Sequence[Chunk],
) -> list[tuple[str, list[Step]]]:
    """``read_with_memory`` for every question at once: each chunk is read for every question,
    in question order, before the next chunk, so that consecutive calls read the same chunk
    (a prefix cache holds one chunk at a time). Question i's calls go through ``contexts[i]``
    and each question's memory and steps are exactly those of its own pass."""
    memories = [NO_MEMORY] * len(questions)
    steps: list[list[Step]] = [[] for _ in questions]
    reading = [True] * len(questions)  # False once a question's exit gate stopped it
    keys = [question_key(config, question, chunks) for question in questions]
    for offset, chunk in enumerate(chunks):  # one chunk in memory at a time (spooled chunks)
        for i, (ctx, question) in enumerate(zip(contexts, questions, strict=True)):
            if not reading[i]:
                continue
            memories[i], calls = await update_and_probe(
                ctx, config, question, memories[i], chunk, len(steps[i]), key=keys[i]
            )
            steps[i] += calls
            reading[i] = not stops_here(calls[-1], config, offset + 1, len(chunks))
    return list(zip(memories, steps, strict=True))


def question_key(config: MemAgentConfig, question: str, chunks: Sequence[Chunk]) -> frozenset[str]:
    """With focused rereads or grounded notes, and ``question_keys``, the terms of
    ``question`` that set its best match in the document ``chunks`` apart from rivals sharing
    its frame (another key's needle; citations/focus.py ``key_terms``); empty otherwise, or
    when nothing does. One pass over the chunks' text, with no call."""
    if not (config.question_keys and (config.focused_reread or config.grounded_notes)):
        return frozenset()
    return key_terms((chunk.text for chunk in chunks), question, config.keep_notes_share)


def read_share(
    config: MemAgentConfig, steps: list[Step], chunks: Sequence[Chunk]
) -> dict[str, int]:
    """With the exit gate or probe on, how much of the document the run read: ``chunks_read``
    of ``chunks`` (run config, ``--json``, eval reports); nothing with both off, as before."""
    if not (config.exit_gate or config.exit_probe):
        return {}
    read = sum(s.kind == "update" and FOCUSED_REREAD not in s.flags for s in steps)
    return {"chunks_read": read, "chunks": len(chunks)}


def run_notes(plan: ChunkPlan, steps: list[Step], memory_cap: int) -> list[str]:
    """Things the user should know about how the run went."""
    notes = [note] if (note := plan.note()) else []
    stopped = next((s for s in steps if GATE_EXIT in s.flags), None)
    if stopped is not None and stopped.chunk_index is not None:
        notes.append(f"the exit gate stopped reading after chunk {stopped.chunk_index + 1}")
    refused = sum(GATE_EXIT_UNGROUNDED in s.flags for s in steps)
    if refused:
        notes.append(
            f"{refused} exit(s) refused: notes about the question not found in the sections read"
        )
    cut_notes = sum(NOTES_UNGROUNDED in s.flags for s in steps)
    if cut_notes:
        notes.append(
            f"{cut_notes} update(s) had notes about the question not found in the sections "
            "read: cut from the memory"
        )
    repaired = sum(COPY_REPAIRED in s.flags for s in steps if s.kind == "update")
    if repaired:
        notes.append(
            f"{repaired} update(s) nearly copied a value from the section: the section's "
            "written in its place"
        )
    if any(COPY_REPAIRED in s.flags for s in steps if s.kind == "final"):
        notes.append("the answer nearly copied a value from the memory: the memory's given")
    cleared = sum(NOTES_UNRELATED in s.flags for s in steps)
    if cleared:
        notes.append(
            f"{cleared} update(s) left notes about nothing the question asks: memory cleared"
        )
    reread = sum(FOCUSED_REREAD in s.flags for s in steps)
    if reread:
        notes.append(
            f"{reread} section(s) whose update left no note restating the question were "
            "reread with only their sentences about it"
        )
    quoted = sum(FOCUS_QUOTED in s.flags for s in steps)
    if quoted:
        notes.append(
            f"{quoted} reread(s) left no note restating the question either: the sentences "
            "they were shown were put in the memory as the section has them"
        )
    restored = sum(NOTES_RESTORED in s.flags for s in steps)
    if restored:
        notes.append(
            f"{restored} update(s) gave up notes restating the question: the notes were kept"
        )
    kept_unwritten = sum(GATE_KEEP in s.flags for s in steps)
    if kept_unwritten:
        notes.append(f"{kept_unwritten} update(s) said <keep/>: the memory was kept unwritten")
    cut = sum(MEMORY_TRUNCATED in s.flags for s in steps)
    if cut:
        notes.append(f"{cut} memory update(s) reached the {memory_cap}-token cap and were cut")
    kept = sum(MEMORY_KEPT in s.flags for s in steps)
    if kept:
        notes.append(f"{kept} memory update(s) held no memory; the previous memory was kept")
    return notes
