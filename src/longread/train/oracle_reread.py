"""Oracle MemReread episodes (issue 28): the conversations of an ideal rereading reader, in
MemReread's own prompts and tags, for the warm start of its formats.

The root pass keeps what a forward reader can know matters when it reads it: for a reversed
two-hop chain (``longread data chains``) that is the bridge only ("The amber parcel was sent
to Warehouse Delta."), since the place's code came in an earlier section than anything that
tied it to the question (in the same section, both are kept); for every other sample, its
evidence as ``oracle.py`` has it. Then:

- **decide**: ``<stop/>`` when the notes hold a gold answer, else the sample's sub-question
  (``meta["sub_question"]``: "What is the door code of Warehouse Delta?") in
  ``<subquestion>`` tags;
- **reread**: a MemAgent pass over the same sections for the sub-question, keeping the fact
  that answers it, and its boxed answer;
- **integrate**: the root notes plus what the reread found (no ``<confirmed>`` tags: no fact
  is in both);
- **decide** again: ``<stop/>``; the **final** answer from the integrated notes.

Like ``oracle.py``'s episodes this is supervised data derived from the gold answer: a warm
start, reported apart from RL.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ..agents.memagent import NO_MEMORY
from ..agents.memreread import MemReread, decide_messages, integrate_messages
from ..data.evidence import evidence_sentences
from ..data.records import Sample
from ..text.chunking import Chunk
from .oracle import OracleTurn, Reading, oracle_final, oracle_pass


def root_evidence(sample: Sample, chunks: Sequence[Chunk]) -> list[str]:
    """What the root pass keeps: a reversed chain's bridge only when its fact came in an
    earlier section; else all the evidence."""
    evidence = evidence_sentences(sample)
    if sample.meta.get("dataset") == "chains" and sample.meta.get("order") == "reversed":
        fact, bridge = evidence[:2]
        if _section_of(fact, chunks) < _section_of(bridge, chunks):
            return [bridge]
    return evidence


def _section_of(sentence: str, chunks: Sequence[Chunk]) -> int:
    return next((i for i, chunk in enumerate(chunks) if sentence in chunk.text), len(chunks))


async def reread_episode(
    agent: MemReread,
    sample: Sample,
    rng: random.Random | None = None,
    noise_rate: float = 0.0,
    claim_rate: float = 0.0,
) -> list[OracleTurn]:
    """The ideal MemReread run over ``sample`` with ``agent``'s chunking and prompts (see the
    module docstring); noisy notes and false claims as in ``oracle.oracle_episode``, in the
    root pass only."""
    rng = rng or random.Random(0)
    config = agent.config
    _, chunks = await agent.chunks(sample.question, sample.context)
    root = Reading(
        sample.question, root_evidence(sample, chunks), list(sample.answers), config.section_first,
        noise_rate, claim_rate,
    )  # fmt: skip
    turns, memory = oracle_pass(config.prompts, chunks, root, rng)
    history: list[tuple[str, str]] = []
    sub_question = sample.meta.get("sub_question")
    if not _answers(memory, sample.answers) and sub_question and config.max_reread > 0:
        turns.append(_decide(agent, sample.question, memory, history, _ask(sub_question)))
        sub_turns, sub_memory, sub_answer = _reread(agent, chunks, sample, sub_question, rng)
        turns += sub_turns
        integrated = _integrate(memory, sub_memory)
        messages = integrate_messages(
            sample.question, memory, sub_question, sub_answer, sub_memory, config.prompts
        )
        turns.append(OracleTurn(messages, integrated, "integrate"))
        history.append((sub_question, sub_answer))
        memory = integrated
    if config.max_reread > len(history):
        turns.append(_decide(agent, sample.question, memory, history, "<stop/>"))
    turns.append(oracle_final(config.prompts, sample.question, memory, sample.answers))
    return turns


def _answers(memory: str, answers: Sequence[str]) -> bool:
    return any(gold.strip() and gold in memory for gold in answers)


def _ask(sub_question: str) -> str:
    return f"<subquestion>{sub_question}</subquestion>"


def _decide(
    agent: MemReread, question: str, memory: str, history: list[tuple[str, str]], reply: str
) -> OracleTurn:
    messages = decide_messages(question, memory, history, agent.config.prompts)
    return OracleTurn(messages, reply, "decide")


def _reread(
    agent: MemReread, chunks: Sequence[Chunk], sample: Sample, sub_question: str,
    rng: random.Random,
) -> tuple[list[OracleTurn], str, str]:  # fmt: skip
    """The reread pass for ``sub_question`` over the root's sections (MemReread rereads the
    same chunks): its turns, notes and answer. It keeps the fact (the first evidence
    sentence of a chain)."""
    fact = evidence_sentences(sample)[:1]
    reading = Reading(sub_question, fact, list(sample.answers), agent.config.section_first)
    turns, sub_memory = oracle_pass(agent.config.prompts, chunks, reading, rng)
    final = oracle_final(agent.config.prompts, sub_question, sub_memory, sample.answers)
    sub_answer = final.reply.removeprefix("\\boxed{").removesuffix("}")
    return [*turns, final], sub_memory, sub_answer


def _integrate(memory: str, sub_memory: str) -> str:
    """The root notes with what the reread found added (each sentence once)."""
    if memory == NO_MEMORY:
        return sub_memory
    if sub_memory == NO_MEMORY or sub_memory in memory:
        return memory
    return f"{memory} {sub_memory}"
