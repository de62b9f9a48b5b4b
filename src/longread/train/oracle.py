"""Oracle memagent episodes: the conversations an ideal note-keeper would have, for a warm start.

The prompts are the agent's own (its chunking, ``update_messages``, ``final_messages``), so a
model fine-tuned on them reads exactly what it will read at run time. The ideal reply to an
update is the old notes plus the sentences of the section that hold evidence, copied; the ideal
final reply is the gold answer in ``\\boxed{}``. Evidence sentences are those that contain a gold
answer (a needle's sentence), or the ones a sample lists in ``meta["evidence"]`` (e.g. HotpotQA's
supporting sentences). This is supervised data derived from the gold answer: a warm start must be
reported as such, separately from RL (ALGORITHMS.md, issue 10).

Noisy notes (``noise_rate`` > 0): an oracle episode only ever shows clean notes, but a model
that once copies a filler sentence into its notes reads its own filler on every later call, a
state the clean episodes never showed it; on 32K needles the shipped adapter's misses all
started there (it kept copying filler and skipped the needle). With noise, an update's prompt
shows the clean notes plus a run of filler sentences from sections already read, and the ideal
reply is still the clean notes: the notes the policy might have written, and how to mend them
(the idea of DAgger, with the policy's typical error simulated instead of sampled).

False claims (``claim_rate`` > 0): the other state the adapters were seen to fail from. Before
any evidence comes, a model may write a made-up answer into its notes ("The special magic
number mentioned in the document is 11.") and keep it when the needle comes. With claims, an
update's prompt shows such a claim (the question's words with a wrong value) among the notes,
and the ideal reply is still the clean notes: an answer the document has not given is dropped.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING

from ..agents.memagent import (
    NO_MEMORY,
    MemAgent,
    final_messages,
    probe_messages,
    update_messages,
)
from ..agents.prompts import Prompts
from ..data.evidence import evidence_sentences, split_sentences
from ..data.records import Sample
from ..errors import UsageError
from ..llm.base import Message
from ..text.chunking import Chunk
from .distill import teacher_of
from .episodes import TrainingRow

if TYPE_CHECKING:  # torch only where rows are tokenised: the oracle's text stays light
    from .policy import Policy


@dataclass(frozen=True)
class OracleTurn:
    """One conversation of an oracle episode: what the agent sends, and the ideal reply."""

    messages: list[Message]
    reply: str
    kind: str  # "update", "probe" (the exit probe), "final"; MemReread's "decide", "integrate"
    takes_evidence: bool = False  # an update whose notes take in evidence from its section
    from_empty: bool = False  # an update shown empty notes: where a made-up answer starts
    follows_up: bool = False  # a MemReread decision that asks again after a round (history)
    distilled: bool = False  # a teacher adapter's own reply (distill.py), never dropped


# Longest run of filler sentences a noisy prompt adds to the notes (the shipped adapter's
# filler notes held 1-8 sentences before a missed needle).
MAX_NOISE_SENTENCES = 6
KEEP_REPLY = "<keep/>"  # the update gate's reply to a section that adds nothing (agents/gates.py)


async def oracle_episode(
    agent: MemAgent,
    sample: Sample,
    noise_rate: float = 0.0,
    rng: random.Random | None = None,
    claim_rate: float = 0.0,
    section_first: bool | None = None,
    noisy_yes: float = 0.0,
    keep_share: float = 1.0,
) -> list[OracleTurn]:
    """The ideal memagent run over ``sample`` with ``agent``'s chunking and prompts.

    With ``noise_rate`` > 0, each update after the first shows, with that chance, notes with
    filler added; with ``claim_rate`` > 0, likewise notes with a false claim added (see the
    module docstring); ``rng`` draws both (seeded by the caller, so a resumed run draws the
    same). ``section_first`` puts the section first in the update prompts (None: as the
    agent's config says). The agent's gates (``update_gate``, ``exit_gate``) shape the ideal
    replies: ``<keep/>`` for a section without evidence, ``<exit/>`` once the notes hold every
    evidence sentence (for multi-hop, after the last hop), and the episode ends there. With
    ``exit_probe`` each update that changes the notes is followed by the probe, answered
    "yes" once the notes hold every evidence sentence (the episode ends there), else "no";
    and each update shown noisy notes is preceded by a probe of those notes, answered "no" (a
    conversation the agent has only if it wrote them: the state noise stands for). With
    ``noisy_yes`` > 0, the probe that says "yes" is, with that chance, asked once more of those
    notes with filler added, also "yes" (notes that copied some noise still answer). With the
    update gate, ``keep_share`` < 1 teaches ``<keep/>`` to only that share of the sections
    without evidence (``rng`` draws which) and the papers' copy of the notes to the rest: all
    ``<keep/>`` left no row that carries notes, and stage sft29g stopped carrying needles.
    A sample with a teacher's updates (``distill.py``) gets those instead (``teacher_turns``)."""
    if section_first is None:
        section_first = agent.config.section_first
    config = agent.config
    if teacher_of(sample):
        return teacher_turns(agent, sample)
    _, chunks = await agent.chunks(sample.question, sample.context)
    reading = Reading(
        sample.question, evidence_sentences(sample), sample.answers, section_first,
        noise_rate, claim_rate, config.update_gate, config.exit_gate, config.gate_instructions,
        config.exit_probe, noisy_yes, keep_share,
    )  # fmt: skip
    prompts = agent.config.prompts
    turns, memory = oracle_pass(prompts, chunks, reading, rng or random.Random(0))
    turns.append(oracle_final(prompts, sample.question, memory, sample.answers))
    return turns


def teacher_turns(agent: MemAgent, sample: Sample) -> list[OracleTurn]:
    """A self-distilled episode: each of the teacher's updates under ``agent``'s own update
    prompt (the papers' order, with its gates' sentences), replied as the teacher replied. No
    final turn: the teacher's notes need not hold the gold answer, and a final row would teach
    the answer from notes that lack it."""
    layout = replace(agent.config, section_first=False)
    prompts = agent.config.prompts
    return [
        OracleTurn(
            update_messages(sample.question, update["memory"], update["section"], prompts, layout),
            update["reply"],
            "update",
            from_empty=update["memory"] == NO_MEMORY,
            distilled=True,
        )
        for update in teacher_of(sample)
    ]


@dataclass(frozen=True)
class Reading:
    """What one oracle pass reads for: its question, the sentences it keeps, the gold answers
    (kept out of noisy notes and false claims), its order and its noise."""

    question: str
    evidence: list[str]
    answers: list[str]
    section_first: bool = False
    noise_rate: float = 0.0
    claim_rate: float = 0.0
    update_gate: bool = False  # the ideal reply to a section without evidence is <keep/>
    exit_gate: bool = False  # ... and once every evidence sentence is kept, <exit/>, and stop
    gate_instructions: bool = True  # the prompts explain the gates (off: the papers' prompt)
    exit_probe: bool = False  # a probe after each change of notes: "yes" once they hold it all
    noisy_yes: float = 0.0  # chance the "yes" probe is also asked of its notes with filler
    keep_share: float = 1.0  # under the update gate: chance a <keep/> is taught, else a copy


def oracle_pass(
    prompts: Prompts | None, chunks: Sequence[Chunk], reading: Reading, rng: random.Random
) -> tuple[list[OracleTurn], str]:
    """The ideal update conversations over ``chunks`` and the notes they end with: each update
    adds the evidence sentences its section holds (see ``oracle_episode``)."""
    memory = NO_MEMORY
    read: list[str] = []  # filler sentences of the sections read so far, in order
    turns = []
    for chunk in chunks:
        claim = partial(false_claim, reading.question, reading.answers, rng)
        shown = slipped(memory, read, rng, reading.noise_rate, reading.claim_rate, claim)
        messages = update_messages(reading.question, shown, chunk.text, prompts, reading)
        if reading.exit_probe and shown != memory and not _holds_all(shown, reading):
            # Noisy notes are notes the policy might have written: the probe must say no to
            # them (a probe taught only on clean notes says yes to any change: stage sft29p).
            noisy = probe_messages(reading.question, shown, prompts)
            turns.append(OracleTurn(noisy, "no", "probe"))
        read += filler_sentences(chunk.text, reading.evidence, reading.answers)
        found = [s for s in reading.evidence if s in chunk.text and s not in memory]
        if found:
            memory = " ".join(found) if memory == NO_MEMORY else f"{memory} {' '.join(found)}"
        stops = reading.exit_gate or reading.exit_probe
        done = stops and bool(reading.evidence) and _holds_all(memory, reading)
        keeps = _keeps(reading, rng)
        reply = _gated_reply(memory, shown, found, done and reading.exit_gate, keeps)
        turn = OracleTurn(
            messages, reply, "update", takes_evidence=bool(found), from_empty=shown == NO_MEMORY
        )
        turns.append(turn)
        tagged = done and reading.exit_gate  # an <exit/> already stops: the agent asks no probe
        if reading.exit_probe and memory != shown and not tagged:  # a change of notes: probe
            probe = probe_messages(reading.question, memory, prompts)
            turns.append(OracleTurn(probe, "yes" if done else "no", "probe"))
            if done and read and reading.noisy_yes > 0 and rng.random() < reading.noisy_yes:
                # A probe taught "yes" only on clean notes says no once they copied some
                # filler too (stage sft29q: bench/exit_probe_wordings.py)
                noisy = probe_messages(reading.question, _with_filler(memory, read, rng), prompts)
                turns.append(OracleTurn(noisy, "yes", "probe"))
        if done:
            break
    return turns, memory


def _holds_all(memory: str, reading: Reading) -> bool:
    return all(sentence in memory for sentence in reading.evidence)


def _keeps(reading: Reading, rng: random.Random) -> bool:
    """Whether this update, if its section adds nothing, is taught ``<keep/>`` (the update
    gate on): always with ``keep_share`` 1, which draws nothing (earlier runs' draws stay);
    else with that chance, the rest taught as the papers' copy of the notes."""
    if not reading.update_gate:
        return False
    return reading.keep_share >= 1.0 or rng.random() < reading.keep_share


def _gated_reply(memory: str, shown: str, found: list[str], done: bool, keeps: bool) -> str:
    """The ideal reply under the gates: ``<keep/>`` when ``keeps`` and the section adds
    nothing and the shown notes are the clean ones (noisy or claimed notes are rewritten
    clean), the notes with ``<exit/>`` once they hold every evidence sentence, else the
    notes."""
    if keeps and not found and shown == memory and not done:
        return KEEP_REPLY
    return f"{memory} <exit/>" if done else memory


def oracle_final(
    prompts: Prompts | None, question: str, memory: str, answers: Sequence[str]
) -> OracleTurn:
    """The ideal final call: the shortest gold answer, boxed."""
    messages = final_messages(question, memory, prompts)
    return OracleTurn(messages, f"\\boxed{{{shortest_answer(answers)}}}", "final")


def filler_sentences(text: str, evidence: Sequence[str], answers: Sequence[str]) -> list[str]:
    """The sentences of ``text`` that are neither evidence nor hold a gold answer."""
    golds = [g for g in answers if g.strip()]
    return [
        s
        for s in split_sentences(text)
        if not any(s in e or e in s for e in evidence) and not any(g in s for g in golds)
    ]


def slipped(
    memory: str, read: Sequence[str], rng: random.Random, noise_rate: float, claim_rate: float,
    claim: Callable[[], str],
) -> str:  # fmt: skip
    """The notes an update is shown: ``memory`` or, once sections have been ``read`` and by
    chance, ``memory`` with filler of them (``noise_rate``) and/or a made-up note drawn by
    ``claim`` (``claim_rate``) added, as the policy writes them. Nothing is drawn at a 0 rate."""
    shown = memory
    if read and noise_rate > 0 and rng.random() < noise_rate:
        shown = _with_filler(memory, read, rng)
    if read and claim_rate > 0 and rng.random() < claim_rate:
        shown = _with_claim(shown, claim(), rng)
    return shown


def _with_filler(memory: str, read: Sequence[str], rng: random.Random) -> str:
    """``memory`` with a run of consecutive ``read`` sentences before or after it (instead of
    it, when the notes are still empty), as a model that copies filler writes them."""
    count = rng.randint(1, min(MAX_NOISE_SENTENCES, len(read)))
    start = rng.randrange(len(read) - count + 1)
    filler = " ".join(read[start : start + count])
    if memory == NO_MEMORY:
        return filler
    return f"{filler} {memory}" if rng.random() < 0.5 else f"{memory} {filler}"


# "What is the special magic number for X mentioned in the provided text?" -> its subject
_WHAT_IS = re.compile(r"^what (?P<verb>is|are|was|were) (?P<subject>.+?)\s*\?*$", re.IGNORECASE)


def false_claim(question: str, answers: Sequence[str], rng: random.Random) -> str:
    """A made-up answer to ``question``, as a model writes one before the evidence: the
    question's words with a value that is not a gold answer ("The special magic number for X
    mentioned in the provided text is 11."), or "The answer is ..." for other questions."""
    wrong = _wrong_value(answers, rng)
    framed = question_subject(question)
    if framed is None:
        return f"The answer is {wrong}."
    verb, subject = framed
    return f"{subject} {verb} {wrong}."


def question_subject(question: str) -> tuple[str, str] | None:
    """("is", "The special magic number for X") for "What is the special magic number for
    X?" (the verb, and the subject capitalised), or None for a question not of that form."""
    match = _WHAT_IS.match(question.strip())
    if not match:
        return None
    subject = match["subject"]
    return match["verb"], f"{subject[0].upper()}{subject[1:]}"


def _wrong_value(answers: Sequence[str], rng: random.Random) -> str:
    """A number (of the gold's length, or a small one as models often make up) for a
    numeric gold, else a short word; never a gold answer."""
    golds = {a.strip() for a in answers}
    gold = shortest_answer(answers).strip()
    while True:
        if gold.isdigit():
            digits = len(gold) if rng.random() < 0.5 else rng.randint(1, 2)
            value = str(rng.randrange(10 ** (digits - 1), 10**digits))
        else:
            value = rng.choice(_MADE_UP_WORDS)
        if value not in golds:
            return value


_MADE_UP_WORDS = ("yes", "no", "unknown", "John Smith", "London", "1990", "the United States")


def _with_claim(memory: str, claim: str, rng: random.Random) -> str:
    """``memory`` with ``claim`` before or after it (instead of it, when still empty)."""
    if memory == NO_MEMORY:
        return claim
    return f"{claim} {memory}" if rng.random() < 0.5 else f"{memory} {claim}"


def oracle_rows(
    agent: MemAgent,
    policy: Policy,
    samples: Sequence[Sample],
    evidence_weight: float = 1.0,
    noise_rate: float = 0.0,
    rng: random.Random | None = None,
    claim_rate: float = 0.0,
    update_share: float = 1.0,
    section_first_share: float = 0.0,
    other_agents: Sequence[MemAgent] = (),
    keep_empty_updates: bool = False,
    noisy_yes: float = 0.0,
    first_hop: float = 0.0,
    decision_weight: float = 1.0,
    row_kinds: Collection[str] = (),
    followup_weight: float = 1.0,
    rememr1_thoughts: bool = True,
    keep_share: float = 1.0,
    keep_weight: float = 1.0,
) -> list[TrainingRow]:
    """Training rows of the oracle episodes of ``samples`` (see ``oracle.py``): the prompt
    through the policy's chat template, the ideal reply's ids plus end-of-turn, cut to the
    agent's token cap (a reply the cap would cut is learnt cut, without end-of-turn). A row's
    ``weight`` is its weight in the loss (it has no advantage): ``evidence_weight`` for the
    updates that take in evidence, 1 for the rest. ``noise_rate``, ``claim_rate`` and ``rng``:
    noisy notes and false claims (``oracle_episode``). ``update_share`` < 1 keeps only that
    share of the updates that take in no evidence (``rng`` draws which; the rest of the
    episode is still run, so a kept row shows the memory state its place in the document
    gives): a long document then costs a few rows, not one per section.
    ``keep_empty_updates`` exempts the updates shown empty notes from that draw: where a model
    writes a made-up answer before any evidence (stage 2a did so in the section-first order).
    ``section_first_share`` > 0 builds that share of the episodes (drawn per sample) in the
    section-first order (``MemAgentConfig.section_first``), so one adapter learns both orders;
    0 keeps the agent's own order and draws nothing. ``other_agents`` (the same prompts and
    caps, other chunk sizes): each sample's episode is cut by one drawn from ``agent`` and
    them; none draws nothing. ``noisy_yes``: the exit probe's "yes" also on noisy notes
    (``oracle_episode``). ``first_hop``: MemReread's first-hop rounds (``reread_episode``).
    ``decision_weight``: the weight of MemReread's decide rows (a few tokens each, so a plain
    token mean gives them little say against the updates); those that ask a sub-question after
    a round (``OracleTurn.follows_up``) weigh ``followup_weight`` times that. ``row_kinds``:
    only the turns of these kinds become rows (all, when empty); the episodes and their draws
    are unchanged. ``rememr1_thoughts``: ReMemR1's replies open with their reason sentence
    (``rememr1_episode``). ``keep_share``: the update gate's ``<keep/>`` on that share of the
    sections without evidence (``oracle_episode``); ``keep_weight``: the weight of the rows
    whose reply is ``<keep/>``."""
    eos = policy.tokenizer.eos_token_id
    rng = rng or random.Random(0)
    rows = []
    for sample in samples:
        order = None  # the agent's own
        if section_first_share > 0:
            order = rng.random() < section_first_share
        reader = rng.choice([agent, *other_agents]) if other_agents else agent
        turns = asyncio.run(
            _episode(
                reader, sample, noise_rate, rng, claim_rate, order, noisy_yes, first_hop,
                rememr1_thoughts, keep_share,
            )
        )  # fmt: skip
        for index, turn in enumerate(turns):
            if not (keep_empty_updates and turn.from_empty) and _dropped(turn, update_share, rng):
                continue
            if row_kinds and turn.kind not in row_kinds:
                continue
            cap = _cap(reader, turn.kind)
            ids = [*policy.tokenizer.encode(turn.reply, add_special_tokens=False), eos]
            rows.append(
                TrainingRow(
                    prompt_ids=policy.prompt_ids(turn.messages),
                    completion_ids=ids[:cap],
                    old_logprobs=None,
                    advantage=0.0,  # supervised: no policy gradient
                    group=sample.id,
                    rollout="oracle",
                    step=index,
                    is_final=turn.kind == "final",
                    weight=_weight(
                        turn, evidence_weight, decision_weight, followup_weight, keep_weight
                    ),
                )
            )
    return rows


async def _episode(
    reader: MemAgent, sample: Sample, noise_rate: float, rng: random.Random, claim_rate: float,
    section_first: bool | None, noisy_yes: float = 0.0, first_hop: float = 0.0,
    rememr1_thoughts: bool = True, keep_share: float = 1.0,
) -> list[OracleTurn]:  # fmt: skip
    """The agent's oracle episode: MemReread's (oracle_reread.py), ReMemR1's
    (oracle_rememr1.py: none when its recall would miss) or MemAgent's."""
    from ..agents.memreread import MemReread
    from ..agents.rememr1 import ReMemR1
    from .oracle_rememr1 import rememr1_episode
    from .oracle_reread import reread_episode

    if teacher_of(sample) and isinstance(reader, ReMemR1 | MemReread):
        raise UsageError(
            f"sample {sample.id}: a teacher's updates are memagent's; "
            f"{type(reader).__name__} cannot train on them"
        )
    if isinstance(reader, ReMemR1):
        episode = rememr1_episode(reader, sample, rememr1_thoughts, noise_rate, claim_rate, rng)
        return await episode or []

    if isinstance(reader, MemReread):
        if section_first is not None:
            reader = type(reader)(
                reader.backend,
                reader.tokenizer,
                replace(reader.config, section_first=section_first),
            )
        return await reread_episode(reader, sample, rng, noise_rate, claim_rate, first_hop)
    return await oracle_episode(
        reader, sample, noise_rate, rng, claim_rate, section_first, noisy_yes, keep_share
    )


def _weight(
    turn: OracleTurn,
    evidence_weight: float,
    decision_weight: float,
    followup_weight: float,
    keep_weight: float = 1.0,
) -> float:
    if turn.takes_evidence:
        return evidence_weight
    if turn.kind == "update" and turn.reply == KEEP_REPLY:
        return keep_weight
    if turn.kind != "decide":
        return 1.0
    return decision_weight * (followup_weight if turn.follows_up else 1.0)


def _cap(reader: MemAgent, kind: str) -> int:
    """The reply cap of a conversation of this kind (its ideal reply is learnt cut there)."""
    if kind == "final":
        return reader.config.final_tokens
    if kind == "decide":
        return reader.config.decide_tokens  # type: ignore[attr-defined]  # MemReread's
    if kind == "probe":
        return reader.config.probe_tokens
    return reader.config.memory_tokens


def _dropped(turn: OracleTurn, update_share: float, rng: random.Random) -> bool:
    """Whether an update without evidence is left out (``update_share`` < 1); the draw is
    made only then, so a share of 1 draws nothing and keeps earlier runs' noise draws. A
    teacher's reply is never left out: those rows are few, and they are the point."""
    if update_share >= 1.0 or turn.kind != "update" or turn.takes_evidence or turn.distilled:
        return False
    return rng.random() >= update_share


def shortest_answer(answers: Sequence[str]) -> str:
    """The shortest non-blank gold alias: what an ideal final reply boxes ("" if none)."""
    usable = [a for a in answers if a.strip()]
    return min(usable, key=len) if usable else ""
