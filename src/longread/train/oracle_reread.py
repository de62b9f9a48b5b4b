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

**First-hop rounds** (``first_hop`` > 0, a chain, ``max_reread`` 2 or more). The trained root
pass often misses the bridge: its notes fill early with filler or another place's code, and
every later update copies them (issue 28, stop 61). A decision shown such notes has no place to
ask about, and the adapter copied the notes into ``<subquestion>``. With chance ``first_hop``
the episode's decision is shown notes that missed the bridge (empty, or one or two sentences
of the document that are not evidence, half the time ones that share a word with the question:
another chain's code or bridge), and the ideal reply asks the first hop ("Where did the olive
satchel end up?"); a reread keeps the bridge and boxes the place; the integration adds it; the
second decision asks the place's code (``meta["sub_question"]``), and a second reread and
integration find and add the fact. This is MemReread's own loop (the most needed sub-question,
then the next), taught from the state a forward reader is in when it missed the bridge.

Like ``oracle.py``'s episodes this is supervised data derived from the gold answer: a warm
start, reported apart from RL.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import NamedTuple

from ..agents.memagent import NO_MEMORY
from ..agents.memreread import MemReread, decide_messages, integrate_messages
from ..citations.align import words
from ..citations.evidence import question_terms
from ..data.evidence import evidence_sentences
from ..data.records import Sample
from ..text.chunking import Chunk
from .oracle import OracleTurn, Reading, filler_sentences, oracle_final, oracle_pass


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
    first_hop: float = 0.0,
) -> list[OracleTurn]:
    """The ideal MemReread run over ``sample`` with ``agent``'s chunking and prompts (see the
    module docstring); noisy notes and false claims as in ``oracle.oracle_episode``, in the
    root pass only; ``first_hop``: the chance of a first-hop round (module docstring)."""
    rng = rng or random.Random(0)
    config = agent.config
    _, chunks = await agent.chunks(sample.question, sample.context)
    root = Reading(
        sample.question, root_evidence(sample, chunks), list(sample.answers), config.section_first,
        noise_rate, claim_rate,
    )  # fmt: skip
    turns, memory = oracle_pass(config.prompts, chunks, root, rng)
    history: list[tuple[str, str]] = []
    # Drawn only when asked for, so that stages without first hops keep their rows.
    drawn = config.max_reread >= 2 and first_hop > 0 and rng.random() < first_hop
    if drawn and (hop := first_hop_question(sample, rng)):
        memory = notes_without_bridge(sample, chunks, rng)
        bridge = evidence_sentences(sample)[1]
        place = [sample.meta["bridge_entity"]]
        memory = _round(agent, sample, chunks, memory, history, Hop(hop, bridge, place), turns, rng)
    sub_question = sample.meta.get("sub_question")
    if not _answers(memory, sample.answers) and sub_question and config.max_reread > len(history):
        fact = Hop(sub_question, evidence_sentences(sample)[0], list(sample.answers))
        memory = _round(agent, sample, chunks, memory, history, fact, turns, rng)
    if config.max_reread > len(history):
        turns.append(_decide(agent, sample.question, memory, history, "<stop/>"))
    turns.append(oracle_final(config.prompts, sample.question, memory, sample.answers))
    return turns


class Hop(NamedTuple):
    """A sub-question, the sentence its reread keeps, and the answers it boxes."""

    question: str
    keep: str
    answers: list[str]


def _round(
    agent: MemReread, sample: Sample, chunks: Sequence[Chunk], memory: str,
    history: list[tuple[str, str]], hop: Hop, turns: list[OracleTurn], rng: random.Random,
) -> str:  # fmt: skip
    """One reread round asking ``hop``: its decide, reread, answer and integrate turns go to
    ``turns``, its (sub-question, answer) pair to ``history``. Returns the integrated notes."""
    turns.append(_decide(agent, sample.question, memory, history, _ask(hop.question)))
    sub_turns, sub_memory, sub_answer = _reread(agent, chunks, hop, rng)
    turns += sub_turns
    integrated = _integrate(memory, sub_memory)
    messages = integrate_messages(
        sample.question, memory, hop.question, sub_answer, sub_memory, agent.config.prompts
    )
    turns.append(OracleTurn(messages, integrated, "integrate"))
    history.append((hop.question, sub_answer))
    return integrated


# How the first hop is asked: the decision learns the question, not one wording of it.
FIRST_HOP_QUESTIONS = (
    "Where did the {item} end up?",
    "Which place was the {item} sent to?",
    "Where was the {item} sent?",
)


def first_hop_question(sample: Sample, rng: random.Random) -> str | None:
    """The first hop of a two-hop chain ("Where did the olive satchel end up?"); None for
    any other sample."""
    item = sample.meta.get("item")
    if sample.meta.get("dataset") != "chains" or not item or not sample.meta.get("bridge_entity"):
        return None
    return rng.choice(FIRST_HOP_QUESTIONS).format(item=item)


def notes_without_bridge(sample: Sample, chunks: Sequence[Chunk], rng: random.Random) -> str:
    """Root notes of a reader that missed the bridge: empty a quarter of the time, else one
    or two sentences of the document that are neither evidence nor hold the answer, half the
    time ones sharing a word with the question (another chain's code or bridge)."""
    if rng.random() < 0.25:
        return NO_MEMORY
    evidence, answers = evidence_sentences(sample), sample.answers
    sentences = [s for chunk in chunks for s in filler_sentences(chunk.text, evidence, answers)]
    terms = question_terms(sample.question)
    related = [s for s in sentences if terms & words(s)]
    pool = related if related and rng.random() < 0.5 else sentences
    if not pool:
        return NO_MEMORY
    return " ".join(rng.sample(pool, min(len(pool), rng.randint(1, 2))))


def _answers(memory: str, answers: Sequence[str]) -> bool:
    return any(gold.strip() and gold in memory for gold in answers)


def _ask(sub_question: str) -> str:
    return f"<subquestion>{sub_question}</subquestion>"


def _decide(
    agent: MemReread, question: str, memory: str, history: list[tuple[str, str]], reply: str
) -> OracleTurn:
    messages = decide_messages(question, memory, history, agent.config.prompts)
    # A sub-question asked after a round: the decision that must not repeat the history's.
    follows_up = bool(history) and reply != "<stop/>"
    return OracleTurn(messages, reply, "decide", follows_up=follows_up)


def _reread(
    agent: MemReread, chunks: Sequence[Chunk], hop: Hop, rng: random.Random
) -> tuple[list[OracleTurn], str, str]:
    """The reread pass for ``hop`` over the root's sections (MemReread rereads the same
    chunks): its turns, notes and answer. It keeps ``hop.keep`` (a chain's fact, or its bridge
    for the first hop) and boxes ``hop.answers``: the code, or the place."""
    reading = Reading(hop.question, [hop.keep], hop.answers, agent.config.section_first)
    turns, sub_memory = oracle_pass(agent.config.prompts, chunks, reading, rng)
    final = oracle_final(agent.config.prompts, hop.question, sub_memory, hop.answers)
    sub_answer = final.reply.removeprefix("\\boxed{").removesuffix("}")
    return [*turns, final], sub_memory, sub_answer


def _integrate(memory: str, sub_memory: str) -> str:
    """The root notes with what the reread found added (each sentence once)."""
    if memory == NO_MEMORY:
        return sub_memory
    if sub_memory == NO_MEMORY or sub_memory in memory:
        return memory
    return f"{memory} {sub_memory}"
