"""Oracle ReMemR1 episodes (issue 28): the steps of an ideal reader that looks back, in
ReMemR1's own prompts and tags, for the warm start of its format.

Each step replies with one short sentence of reasoning, the new memory in ``<update>`` and,
when the section needs an earlier detail the memory has lost, a ``<recall>`` query. The
memory is bounded, so the reader keeps only what is tied to the question; a fact of the
kind the question asks about (for a two-hop chain, a place's code) is noted in the step that
reads it and, while nothing ties it to the question, dropped at the next step. It stays in
that step's memory in the history, which is what ``<recall>`` searches:

- a reversed chain (``longread data chains``): the place's code is noted in passing, then
  dropped; when the bridge comes ("The amber parcel was sent to Warehouse Delta.") the reply
  asks ``<recall>Warehouse Delta door code</recall>``, the next prompt shows that step's
  memory, and its update keeps the code beside the bridge (after the last section, the final
  call reads it from the recalled slot);
- a forward chain, or any other sample: the evidence is kept as it comes (``oracle.py``'s
  ideal notes); nothing is recalled.

The recall goes through the agent's own history search, as at run time: an episode whose
recall would not bring the fact back is not written (``None``). Supervised data derived from
the gold answer: a warm start, reported apart from RL.

Noisy notes and made-up notes (``run.noisy_notes``, ``run.false_claims``): a step after the
first may show a memory with filler sentences or a made-up note added, as the policy writes
them; the ideal reply is still the clean memory. A made-up note is either a wrong answer
(``oracle.false_claim``) or the question's own frame with no value ("The special magic
number for old-pond mentioned in the provided text."), which warm start sft28q wrote at the
first section and then kept over the needle (CAMPAIGN.md, stop 66). The history the recall
searches keeps the clean memories: the noise stands for one step's slip, not the oracle's.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from functools import partial

from ..agents.memagent import NO_MEMORY
from ..agents.recall import TfidfHistory
from ..agents.rememr1 import ReMemR1, final_messages, format_recalled, step_messages
from ..data.evidence import evidence_sentences, split_sentences
from ..data.records import Sample
from .oracle import (
    OracleTurn,
    false_claim,
    filler_sentences,
    question_subject,
    shortest_answer,
    slipped,
)

NOTHING = "This section adds nothing about the problem."
NOTED = "This section states {attribute}s of places not yet tied to the problem; noting them."
KEPT = "This section adds what the problem needs."
LOST = "This section ties the problem to {place}, whose {attribute} an earlier memory held."


async def rememr1_episode(
    agent: ReMemR1,
    sample: Sample,
    thoughts: bool = True,
    noise_rate: float = 0.0,
    claim_rate: float = 0.0,
    rng: random.Random | None = None,
) -> list[OracleTurn] | None:
    """The ideal ReMemR1 run over ``sample`` with ``agent``'s chunking and prompts (see the
    module docstring), or None when its recall would not find the fact. ``thoughts=False``
    leaves the reason sentence out: a reply starts at ``<update>`` (the prompt asks for a brief
    thought, the format does not need one). The reason is a decision made before any note,
    and warm starts took the commoner one for every section (CAMPAIGN.md, stop 65); without
    it the notes themselves decide, as MemAgent's do. ``noise_rate`` and ``claim_rate``: the
    chance that a step after the first shows noisy or made-up notes (module docstring);
    ``rng`` draws them, and nothing is drawn when both are 0."""
    config = agent.config
    rng = rng or random.Random(0)
    _, chunks = await agent.chunks(sample.question, sample.context)
    evidence = evidence_sentences(sample)
    chain = sample.meta.get("dataset") == "chains" and sample.meta.get("order") == "reversed"
    fact, bridge = (evidence[0], evidence[1]) if chain else ("", "")
    attribute = str(sample.meta.get("attribute", ""))
    history = TfidfHistory()
    kept: list[str] = []  # what is tied to the question, in reading order
    recalled, memory = "", NO_MEMORY  # what the next prompt shows: the last update's memory
    read: list[str] = []  # filler sentences of the sections read so far
    turns: list[OracleTurn] = []
    for step, chunk in enumerate(chunks):
        claim = partial(made_up_note, sample.question, sample.answers, rng)
        shown = slipped(memory, read, rng, noise_rate, claim_rate, claim)
        messages = step_messages(sample.question, recalled, shown, chunk.text, config.prompts)
        read += filler_sentences(chunk.text, evidence, sample.answers)
        if chain and fact in recalled and fact not in kept:
            kept.append(fact)  # the recalled fact, folded in
        new = [s for s in evidence if s in chunk.text and s not in kept]
        if chain and fact in new and bridge not in kept and bridge not in new:
            new.remove(fact)  # nothing ties it to the question yet
        kept += new
        noted = _candidates(chunk.text, attribute, kept) if chain else []
        query = None
        if chain and bridge in new and fact not in kept:
            query = f"{sample.meta['bridge_entity']} {attribute}"
        update = " ".join(kept + noted) or NO_MEMORY
        reason = _reason(new, noted, query, sample, attribute)
        reply = f"{reason}\n<update>{update}</update>" if thoughts else f"<update>{update}</update>"
        if query:
            reply += f"\n<recall>{query}</recall>"
        # noting a code in passing is evidence too: kept from run.update_share's draw
        taken = bool(new or noted or query)
        from_empty = shown == NO_MEMORY
        turns.append(OracleTurn(messages, reply, "update", taken, from_empty))
        # as ReMemR1 does: search the earlier memories first, then add this step's
        hits = history.search(query, config.recall_top_k, config.recall_threshold) if query else []
        recalled = format_recalled(hits)
        history.add(step, update)
        memory = update
    if chain and fact not in memory and fact not in recalled:
        return None
    final = final_messages(sample.question, recalled, memory, config.prompts)
    turns.append(OracleTurn(final, f"\\boxed{{{shortest_answer(sample.answers)}}}", "final"))
    return turns


def made_up_note(question: str, answers: Sequence[str], rng: random.Random) -> str:
    """A note the document never gave: a wrong answer to ``question`` or, half the time when
    the question reads "What is X?", X itself as a sentence with no value."""
    framed = question_subject(question)
    if framed and rng.random() < 0.5:
        return f"{framed[1]}."
    return false_claim(question, answers, rng)


def _candidates(text: str, attribute: str, kept: Sequence[str]) -> list[str]:
    """The sentences of a section that state a code of the asked kind, not already kept."""
    if not attribute:
        return []
    return [
        s for s in split_sentences(text)
        if attribute in s and re.search(r"\d{4,}", s) and s not in kept
    ]  # fmt: skip


def _reason(
    new: list[str], noted: list[str], query: str | None, sample: Sample, attribute: str
) -> str:
    if query:
        return LOST.format(place=sample.meta["bridge_entity"], attribute=attribute)
    if new:
        return KEPT
    if noted:
        return NOTED.format(attribute=attribute)
    return NOTHING
