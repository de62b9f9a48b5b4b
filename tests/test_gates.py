"""memagent's update and exit gates (issue 29): strict parsing, reading stops where the reply
says so (not before --min-read), the papers' behaviour with the gates off."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from longread.agents.gates import read_gates
from longread.agents.memagent import NO_MEMORY, MemAgent, MemAgentConfig
from longread.agents.memreread import MemReread, MemRereadConfig
from longread.errors import UsageError
from longread.llm.base import Message
from longread.text.chunking import Chunk
from longread.trace import (
    FORMAT_ERROR,
    GATE_EXIT,
    GATE_EXIT_EARLY,
    GATE_EXIT_UNGROUNDED,
    GATE_KEEP,
    NOTES_UNGROUNDED,
    NOTES_UNRELATED,
)

from .scripted import ScriptedBackend, WordTokenizer

SECTIONS = ["Ann wrote it.", "The code is 4412.", "Filler.", "More filler.", "The end."]


def chunks(*texts: str) -> list[Chunk]:
    tok = WordTokenizer()
    return [Chunk(i, t, tok.count(t)) for i, t in enumerate(texts)]


def agent_for(backend: ScriptedBackend, **config: object) -> MemAgent:
    return MemAgent(backend, WordTokenizer(), MemAgentConfig(**config))  # type: ignore[arg-type]


def replies_by_section(by_section: dict[str, str], final: str = "\\boxed{4412}"):
    """A backend reply chosen by the section the prompt shows (final calls: ``final``)."""

    def reply(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "\\boxed" in prompt:
            return final
        shown = prompt.split("Section:\n", 1)[1]  # the section, not the memory above it
        return next((r for s, r in by_section.items() if shown.startswith(s)), "<keep/>")

    return reply


@pytest.mark.parametrize(
    ("reply", "memory", "exit_", "misplaced"),
    [
        ("<keep/>", None, False, False),
        (" <KEEP />\n", None, False, False),
        ("The code is 4412. <exit/>", "The code is 4412.", True, False),
        ("<keep/><exit/>", None, True, False),
        ("<keep/> and the code is 4412.", "and the code is 4412.", False, True),
        ("The <exit/> code is 4412.", "The  code is 4412.", False, True),
        ("The code is 4412.", "The code is 4412.", False, False),
    ],
)
def test_gate_tags_count_only_where_a_gate_reads_them(reply, memory, exit_, misplaced):
    gate = read_gates(reply, update_gate=True, exit_gate=True)
    assert (gate.memory, gate.exit, gate.misplaced) == (memory, exit_, misplaced)


def test_an_exit_tag_is_only_text_when_the_exit_gate_is_off():
    gate = read_gates("The code is 4412. <exit/>", update_gate=True, exit_gate=False)
    assert not gate.exit and gate.misplaced and gate.memory == "The code is 4412."


async def test_the_exit_gate_stops_reading_after_the_section_that_answers():
    replies = {SECTIONS[0]: "Ann wrote it.", SECTIONS[1]: "Ann wrote it. Code 4412. <exit/>"}
    backend = ScriptedBackend([replies_by_section(replies)] * 10)
    run = await agent_for(backend, exit_gate=True).run("What is the code?", chunks(*SECTIONS))
    assert [s.kind for s in run.steps] == ["update", "update", "final"]
    assert GATE_EXIT in run.steps[1].flags
    assert run.steps[1].memory == "Ann wrote it. Code 4412."  # the tag is not memory
    assert run.config["chunks_read"] == 2 and run.config["chunks"] == len(SECTIONS)
    summary = run.summary()  # what `ask --json` prints
    assert (summary["chunks_read"], summary["chunks"]) == (2, len(SECTIONS))
    assert any("stopped reading after chunk 2" in note for note in run.notes)
    assert run.answer == "4412"
    assert "<exit/>" in backend.requests[0][0][0]["content"]  # the prompt offers the gate


async def test_with_the_gates_off_every_chunk_is_read_and_the_prompt_is_the_papers():
    replies = {SECTIONS[1]: "Code 4412. <exit/>"}
    gated = ScriptedBackend([replies_by_section(replies)] * 10)
    plain = ScriptedBackend([replies_by_section(replies)] * 10)
    await agent_for(gated, exit_gate=True, update_gate=True).run("q?", chunks(*SECTIONS))
    run = await agent_for(plain).run("q?", chunks(*SECTIONS))
    assert sum(s.kind == "update" for s in run.steps) == len(SECTIONS)
    assert "chunks_read" not in run.config
    assert run.steps[1].memory == "Code 4412. <exit/>"  # a tag means nothing without its gate
    first_plain, first_gated = (
        plain.requests[0][0][0]["content"],
        gated.requests[0][0][0]["content"],
    )
    assert "<keep/>" not in first_plain and "<exit/>" not in first_plain
    assert first_gated.startswith(first_plain.rstrip("\n"))


async def test_the_update_gate_keeps_the_memory_unwritten():
    replies = {SECTIONS[1]: "Code 4412."}  # every other section replies <keep/>
    backend = ScriptedBackend([replies_by_section(replies)] * 10)
    run = await agent_for(backend, update_gate=True).run("What is the code?", chunks(*SECTIONS))
    updates = [s for s in run.steps if s.kind == "update"]
    assert [GATE_KEEP in s.flags for s in updates] == [True, False, True, True, True]
    assert [s.memory for s in updates] == [NO_MEMORY] + ["Code 4412."] * 4
    assert "Code 4412." in backend.requests[-1][0][0]["content"]


async def test_min_read_defers_an_early_exit_until_that_share_is_read():
    replies = {s: "Code 4412. <exit/>" for s in SECTIONS}
    backend = ScriptedBackend([replies_by_section(replies)] * 10)
    agent = agent_for(backend, exit_gate=True, min_read=0.5)
    run = await agent.run("What is the code?", chunks(*SECTIONS))
    updates = [s for s in run.steps if s.kind == "update"]
    assert len(updates) == 3  # 3 of 5 chunks is the first share >= 0.5
    assert [GATE_EXIT_EARLY in s.flags for s in updates] == [True, True, False]
    assert GATE_EXIT in updates[-1].flags


async def test_a_misplaced_gate_tag_is_a_format_error_kept_out_of_the_memory():
    backend = ScriptedBackend([replies_by_section({SECTIONS[0]: "<keep/> Ann wrote it."})] * 10)
    run = await agent_for(backend, update_gate=True).run("Who wrote it?", chunks(*SECTIONS[:1]))
    assert FORMAT_ERROR in run.steps[0].flags and run.steps[0].memory == "Ann wrote it."


async def test_several_questions_stop_each_on_its_own_exit():
    """The chunk-major pass: a question that exited is read no further; the others go on."""

    def reply(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "\\boxed" in prompt:
            return "\\boxed{x}"
        early = "Who wrote it?" in prompt and SECTIONS[0] in prompt
        return "Ann. <exit/>" if early else "notes"

    backend = ScriptedBackend([reply] * 20)
    runs = await agent_for(backend, exit_gate=True).run_many(
        ["Who wrote it?", "What is the code?"], chunks(*SECTIONS)
    )
    assert [sum(s.kind == "update" for s in r.steps) for r in runs] == [1, len(SECTIONS)]
    assert [r.config["chunks_read"] for r in runs] == [1, len(SECTIONS)]


def test_min_read_is_a_share():
    with pytest.raises(UsageError, match="min_read"):
        MemAgentConfig(min_read=1.5)


async def test_oracle_episodes_under_the_gates_are_the_agents_own_conversations():
    """The warm start's ideal replies (train/oracle.py): <keep/> before the evidence, the
    notes and <exit/> once they hold it all; replayed through memagent they give exactly its
    prompts, reading stops at the evidence, and the answer is right."""
    from longread.data.records import Sample
    from longread.train.oracle import oracle_episode

    filler = [f"Filler line {i} about the hills." for i in range(200)]
    needle = "The special magic number is 4720519."
    doc = " ".join([*filler[:90], needle, *filler[90:]])
    sample = Sample("n", "What is the special magic number?", doc, ["4720519"])
    config = {"chunk_tokens": 200, "update_gate": True, "exit_gate": True}
    turns = await oracle_episode(agent_for(ScriptedBackend([]), **config), sample)
    updates = [t for t in turns if t.kind == "update"]
    assert [t.reply for t in updates[:-1]] == ["<keep/>"] * (len(updates) - 1)
    assert updates[-1].reply == f"{needle} <exit/>"
    backend = ScriptedBackend([t.reply for t in turns])
    run = await agent_for(backend, **config).run(sample.question, sample.context)
    assert [m for m, _ in backend.requests] == [t.messages for t in turns]
    assert run.answer == "4720519" and run.config["chunks_read"] < run.config["chunks"]


async def test_keep_share_teaches_keep_on_some_empty_sections_and_copies_on_the_rest():
    """``keep_share`` < 1: only that share of the sections without evidence is taught
    <keep/>; the rest are the papers' copy of the notes, so rows that carry notes stay (all
    <keep/>, stage sft29g stopped carrying needles). The episode's prompts are unchanged,
    and 1 draws nothing: the same episode, with the same rng state after it."""
    import random

    from longread.data.records import Sample
    from longread.train.oracle import oracle_episode

    filler = [f"Filler line {i} about the hills." for i in range(400)]
    needle = "The special magic number is 4720519."
    doc = " ".join([*filler[:100], needle, *filler[100:]])
    sample = Sample("n", "What is the special magic number?", doc, ["4720519"])
    agent = agent_for(ScriptedBackend([]), chunk_tokens=200, update_gate=True)
    every_rng, half_rng = random.Random(5), random.Random(5)
    every = await oracle_episode(agent, sample, rng=every_rng)
    half = await oracle_episode(agent, sample, rng=half_rng, keep_share=0.5)
    assert [t.messages for t in half] == [t.messages for t in every]
    pairs = list(zip(every, half, strict=True))
    empty = [(a, b) for a, b in pairs if a.kind == "update" and a.reply == "<keep/>"]
    copied = [b for a, b in empty if b.reply != "<keep/>"]
    assert 0 < len(copied) < len(empty)
    after_needle = [b for b in copied if needle in b.messages[-1]["content"].split("Section:")[0]]
    assert after_needle and all(b.reply == needle for b in after_needle)
    assert all(a.reply == b.reply for a, b in pairs if (a, b) not in empty)
    again = random.Random(5)
    assert await oracle_episode(agent, sample, rng=again, keep_share=1.0) == every
    assert again.random() == every_rng.random()


@pytest.mark.parametrize("setting", ["keep_share = 0.3", "keep_weight = 4"])
def test_keep_rows_need_the_update_gate(tmp_path, setting):
    """A stage that shapes <keep/> rows without the update gate is refused before training."""
    from longread.train.config import load_config

    config = tmp_path / "stage.toml"
    config.write_text(
        '[model]\npath = "smollm2"\n[agent]\nname = "memagent"\n'
        f'[run]\nobjective = "sft"\n{setting}\n'
    )
    with pytest.raises(UsageError, match=setting.split()[0]):
        load_config(config)


class CharPolicy:
    """What ``oracle_rows`` asks of a policy: ids for a prompt and for a reply (a character
    each), and an end-of-turn id."""

    class tokenizer:  # the attribute a policy has
        eos_token_id = 0

        @staticmethod
        def encode(text: str, add_special_tokens: bool = False) -> list[int]:
            return [ord(c) for c in text]

    @staticmethod
    def prompt_ids(messages: Sequence[Message]) -> list[int]:
        return [ord(c) for m in messages for c in m["content"]]


def test_keep_weight_weighs_only_the_keep_rows():
    """``keep_weight``: the rows whose reply is <keep/> weigh that much in the loss (a few
    tokens each, a token mean gives them little say: stage sft29v), the evidence rows keep the
    evidence weight and the rest 1, and every row's ids stay the same."""
    from longread.data.records import Sample
    from longread.train.oracle import oracle_rows

    filler = [f"Filler line {i} about the hills." for i in range(400)]
    needle = "The special magic number is 4720519."
    doc = " ".join([*filler[:100], needle, *filler[100:]])
    sample = Sample("n", "What is the special magic number?", doc, ["4720519"])
    agent = agent_for(ScriptedBackend([]), chunk_tokens=200, update_gate=True)
    rows = oracle_rows(agent, CharPolicy(), [sample], evidence_weight=3.0, keep_weight=5.0)
    plain = oracle_rows(agent, CharPolicy(), [sample], evidence_weight=3.0)
    keeps = [r.completion_ids == [*map(ord, "<keep/>"), 0] for r in rows]
    assert any(keeps) and not all(keeps)
    assert [r.completion_ids for r in rows] == [r.completion_ids for r in plain]
    for row, before, kept in zip(rows, plain, keeps, strict=True):
        assert row.weight == (5.0 if kept else before.weight)
    assert {r.weight for r in plain} == {1.0, 3.0}


async def test_gates_without_instructions_read_tags_under_the_papers_prompt():
    """``gate_instructions=False``: every update prompt is the papers' to the byte, yet a
    trained reply's <exit/> still stops reading; the oracle teaches it under that prompt."""
    from longread.data.records import Sample
    from longread.train.oracle import oracle_episode

    filler = [f"Filler line {i} about the hills." for i in range(200)]
    doc = " ".join([*filler[:90], "The special magic number is 4720519.", *filler[90:]])
    sample = Sample("n", "What is the special magic number?", doc, ["4720519"])
    silent = {"chunk_tokens": 200, "exit_gate": True, "gate_instructions": False}
    turns = await oracle_episode(agent_for(ScriptedBackend([]), **silent), sample)
    papers = await oracle_episode(agent_for(ScriptedBackend([]), chunk_tokens=200), sample)
    updates = [t for t in turns if t.kind == "update"]
    assert [t.messages for t in updates] == [t.messages for t in papers[: len(updates)]]
    assert updates[-1].reply.endswith("<exit/>") and len(updates) < len(papers) - 1
    backend = ScriptedBackend([t.reply for t in turns])
    run = await agent_for(backend, **silent).run(sample.question, sample.context)
    assert [m for m, _ in backend.requests] == [t.messages for t in turns]
    assert run.config["chunks_read"] == len(updates) < run.config["chunks"]


# --- the exit probe: a yes/no call after each change of memory --------------------------

PROBE_ASKS = "Reply with yes or no only."


def probed(by_section: dict[str, str], probes: Sequence[str]):
    """Update replies by section (else the memory shown, unchanged), probe replies in order."""
    answers = iter(probes)

    def reply(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "\\boxed" in prompt:
            return "\\boxed{4412}"
        if PROBE_ASKS in prompt:
            return next(answers)
        shown = prompt.split("Section:\n", 1)[1]
        memory = prompt.split("Memory:\n", 1)[1].split("\n\nSection:", 1)[0]
        return next((r for s, r in by_section.items() if shown.startswith(s)), memory)

    return reply


@pytest.mark.parametrize(
    ("reply", "answer"),
    [("yes", True), (" Yes.", True), ("NO", False), ("no, not yet", False), ("maybe", None),
     ("", None), ("yesterday", None)],
)  # fmt: skip
def test_a_probe_reply_is_read_by_its_first_word(reply, answer):
    from longread.agents.memagent import probe_answer

    assert probe_answer(reply) is answer


async def test_the_exit_probe_asks_after_each_change_of_memory_and_stops_on_yes():
    replies = {SECTIONS[0]: "Ann wrote it.", SECTIONS[1]: "Ann wrote it. Code 4412."}
    backend = ScriptedBackend([probed(replies, ["no", "yes"])] * 10)
    run = await agent_for(backend, exit_probe=True).run("What is the code?", chunks(*SECTIONS))
    assert [s.kind for s in run.steps] == ["update", "probe", "update", "probe", "final"]
    assert [s.step for s in run.steps] == [0, 1, 2, 3, 4]
    assert GATE_EXIT in run.steps[3].flags and run.steps[3].chunk_index == 1
    assert run.config["chunks_read"] == 2 and run.config["chunks"] == len(SECTIONS)
    assert any("stopped reading after chunk 2" in note for note in run.notes)
    probe_prompt = backend.requests[3][0][-1]["content"]
    assert "Ann wrote it. Code 4412." in probe_prompt and SECTIONS[2] not in probe_prompt
    update_prompt = backend.requests[0][0][-1]["content"]
    assert "<exit/>" not in update_prompt and PROBE_ASKS not in update_prompt  # the papers'


async def test_no_probe_follows_an_unchanged_memory_and_a_malformed_one_reads_on():
    replies = {SECTIONS[1]: "Code 4412."}  # the other sections leave the memory as it was
    backend = ScriptedBackend([probed(replies, ["perhaps"])] * 10)
    run = await agent_for(backend, exit_probe=True).run("What is the code?", chunks(*SECTIONS))
    kinds = [s.kind for s in run.steps]
    assert kinds == ["update", "update", "probe", "update", "update", "update", "final"]
    assert FORMAT_ERROR in run.steps[2].flags and GATE_EXIT not in run.steps[2].flags
    assert run.config["chunks_read"] == len(SECTIONS)


async def test_after_a_probe_the_answer_reads_the_new_memory_in_an_evaluation(tmp_path):
    """An evaluation hands each step to its trace as the next call starts, and sheds the
    step's text; the update's memory must outlive its probe's call (it once did not)."""
    from longread.agents import make_agent, make_config
    from longread.data.records import Sample
    from longread.eval.runner import run_eval

    from .eval_helpers import open_store

    doc = " ".join([*(f"Filler line {i}." for i in range(60)), "The code is 4412."])
    backend = ScriptedBackend(["No previous memory", "The code is 4412.", "yes", "\\boxed{4412}"])
    config = make_config("memagent", exit_probe=True, chunk_tokens=150)
    sample = Sample("a", "What is the code?", doc, ["4412"])
    with open_store(tmp_path / "run", "memagent") as store:
        await run_eval(
            [sample],
            lambda p: make_agent("memagent", backend, WordTokenizer(), config, p),
            store,
            1,
            progress=False,
        )
    final_prompt = backend.requests[-1][0][-1]["content"]
    assert "Memory:\nThe code is 4412." in final_prompt


async def test_oracle_probe_episodes_are_the_agents_own_conversations():
    """The warm start of the probe: the update replies are the papers' notes (no tag), a probe
    after each change of notes says no until they hold the evidence, then yes; replayed
    through memagent they give exactly its prompts and stop where the oracle stopped."""
    from longread.data.records import Sample
    from longread.train.oracle import oracle_episode

    filler = [f"Filler line {i} about the hills." for i in range(200)]
    claim = "Ann keeps a blue kite."  # a second fact the notes take, before the evidence
    needle = "The special magic number is 4720519."
    doc = " ".join([*filler[:40], claim, *filler[40:90], needle, *filler[90:]])
    sample = Sample("n", "What is the special magic number?", doc, ["4720519"])
    sample.meta["evidence"] = [claim, needle]
    config = {"chunk_tokens": 200, "exit_probe": True}
    turns = await oracle_episode(agent_for(ScriptedBackend([]), **config), sample)
    assert [(t.kind, t.reply) for t in turns if t.kind == "probe"] == [
        ("probe", "no"),
        ("probe", "yes"),
    ]
    assert not any("<" in t.reply for t in turns)
    backend = ScriptedBackend([t.reply for t in turns])
    run = await agent_for(backend, **config).run(sample.question, sample.context)
    assert [m for m, _ in backend.requests] == [t.messages for t in turns]
    assert run.answer == "4720519" and run.config["chunks_read"] < run.config["chunks"]


async def test_the_oracle_probe_says_no_to_noisy_notes():
    """Probe rows on the noisy notes the oracle shows (filler copied from sections read):
    "no", so the probe does not learn that any change of notes answers the question."""
    import random

    from longread.data.records import Sample
    from longread.train.oracle import oracle_episode

    filler = [f"Filler line {i} about the hills." for i in range(200)]
    needle = "The special magic number is 4720519."
    doc = " ".join([*filler[:150], needle, *filler[150:]])
    sample = Sample("n", "What is the special magic number?", doc, ["4720519"])
    agent = agent_for(ScriptedBackend([]), chunk_tokens=200, exit_probe=True)
    turns = await oracle_episode(agent, sample, noise_rate=1.0, rng=random.Random(3))
    probes = [(t.messages[-1]["content"], t.reply) for t in turns if t.kind == "probe"]
    noisy = [reply for prompt, reply in probes if "Filler line" in prompt]
    assert noisy and set(noisy) == {"no"}
    assert [reply for prompt, reply in probes if needle in prompt] == ["yes"]


async def test_with_noisy_yes_the_oracle_also_says_yes_to_the_answer_with_filler():
    """``noisy_yes``: the notes that complete the evidence are probed once more with filler
    added, and they still answer: "yes" (stage sft29q, never shown such notes, said no to
    the needle with any filler beside it). Off, the episode is the same as before."""
    import random

    from longread.data.records import Sample
    from longread.train.oracle import oracle_episode

    filler = [f"Filler line {i} about the hills." for i in range(200)]
    needle = "The special magic number is 4720519."
    doc = " ".join([*filler[:150], needle, *filler[150:]])
    sample = Sample("n", "What is the special magic number?", doc, ["4720519"])
    agent = agent_for(ScriptedBackend([]), chunk_tokens=200, exit_probe=True)
    plain = await oracle_episode(agent, sample, rng=random.Random(3))
    noisy = await oracle_episode(agent, sample, rng=random.Random(3), noisy_yes=1.0)
    assert len(noisy) == len(plain) + 1
    extra = noisy[-2]  # after the clean "yes" probe, before the final answer
    prompt = extra.messages[-1]["content"]
    assert (extra.kind, extra.reply) == ("probe", "yes")
    assert needle in prompt and "Filler line" in prompt
    assert [(t.kind, t.reply) for t in noisy if t is not extra] == [
        (t.kind, t.reply) for t in plain
    ]


# --- the exit gate's RL terms (GRU-Mem; train/rewards.py, train/credit.py) ----------------

EVIDENCE = [SECTIONS[1]]  # "The code is 4412."


async def gated_run(exit_at: int | None, sections: Sequence[str] = tuple(SECTIONS)):
    """memagent with the exit gate, saying <exit/> at section ``exit_at`` (None: never)."""
    replies = {s: f"Notes {i}." for i, s in enumerate(sections)}
    if exit_at is not None:
        replies[sections[exit_at]] = f"Notes {exit_at}. <exit/>"
    backend = ScriptedBackend([replies_by_section(replies)] * 10)
    return await agent_for(backend, exit_gate=True).run("What is the code?", chunks(*sections))


async def test_stopping_before_the_evidence_costs_the_penalty_whatever_the_answer():
    from longread.train.rewards import exit_gate_reward, run_stopped_before_evidence

    early = await gated_run(exit_at=0)  # read "Ann wrote it." only, yet answered right
    assert run_stopped_before_evidence(early, EVIDENCE)
    assert exit_gate_reward(early, EVIDENCE, 1.0, early_penalty=0.5, skip_bonus=1.0) == -0.5


async def test_a_right_answer_after_the_evidence_earns_the_share_not_read():
    from longread.train.rewards import exit_gate_reward, run_stopped_before_evidence

    run = await gated_run(exit_at=1)  # read 2 of 5 sections
    assert not run_stopped_before_evidence(run, EVIDENCE)
    assert exit_gate_reward(run, EVIDENCE, 1.0, early_penalty=0.5, skip_bonus=1.0) == 0.6
    assert exit_gate_reward(run, EVIDENCE, 0.0, early_penalty=0.5, skip_bonus=1.0) == 0.0


async def test_a_run_that_read_everything_gets_no_gate_term():
    from longread.train.rewards import exit_gate_reward

    run = await gated_run(exit_at=None)
    assert run.config["chunks_read"] == run.config["chunks"]
    assert exit_gate_reward(run, EVIDENCE, 1.0, early_penalty=0.5, skip_bonus=1.0) == 0.0


async def test_an_evidence_sentence_cut_by_a_chunk_boundary_is_read_with_its_end():
    from longread.train.rewards import run_stopped_before_evidence

    cut = ["It was filed by Ann, who wrote", "that the door code of the shed is 4412.", "Filler."]
    run = await gated_run(exit_at=1, sections=cut)  # stops after the sentence's second half
    sentence = "It was filed by Ann, who wrote that the door code of the shed is 4412."
    assert not run_stopped_before_evidence(run, [sentence])
    stopped = await gated_run(exit_at=0, sections=cut)  # only its first half read
    assert run_stopped_before_evidence(stopped, [sentence])


async def test_the_group_credit_ranks_reading_less_above_reading_all_and_early_exits_last():
    from longread.train.credit import group_credit

    runs = [await gated_run(exit_at=1), await gated_run(exit_at=None), await gated_run(0)]
    plain = group_credit(runs, ["4412"])
    assert plain.rewards == [1.0, 1.0, 1.0] and plain.degenerate  # the papers' reward
    gated = group_credit(runs, ["4412"], evidence=EVIDENCE, early_exit_penalty=1.0, skip_bonus=0.5)
    assert gated.rewards == [1.3, 1.0, 0.0] and gated.correct == [1.0, 1.0, 1.0]
    assert not gated.degenerate


def test_gate_rewards_need_the_exit_gate_on(tmp_path):
    from longread.train.config import TrainConfig

    config = TrainConfig()
    config.data.train = [str(tmp_path / "train.jsonl")]
    config.reward.skip_bonus = 0.5
    with pytest.raises(UsageError, match="exit_gate"):
        config.check()
    config.agent.options = {"exit_gate": True}
    config.check()
    config.reward.early_exit_penalty = -1.0
    with pytest.raises(UsageError, match="0 or more"):
        config.check()


# --- the grounded exit: an exit counts only on notes traced to the sections read ----------

NEEDLE = "One of the special magic numbers for quiet-harbor is: 4076011."
NEEDLE_QUESTION = "What is the special magic number for quiet-harbor mentioned in the text?"


def provenance_after(*reads: tuple[str, str], question: str = ""):
    """A Provenance that saw each (section, memory after it) in turn, read for ``question``."""
    from longread.citations import Provenance

    provenance, memory = Provenance(), NO_MEMORY
    for index, (section, new_memory) in enumerate(reads):
        chunk = Chunk(index, section, len(section.split()))
        provenance.on_update(memory, new_memory, chunk, question)
        memory = new_memory
    return provenance


def test_notes_copied_from_a_section_read_ground_an_exit():
    from longread.citations.grounding import ungrounded_notes

    section = f"The hills were quiet that year. {NEEDLE} Nobody came back."
    memory = f"The hills were quiet that year. {NEEDLE}"  # filler beside the needle is fine
    provenance = provenance_after((section, memory))
    assert ungrounded_notes(memory, NEEDLE_QUESTION, provenance) == []
    reworded = "The special magic number for quiet-harbor is 4076011."
    provenance = provenance_after((section, reworded))
    assert ungrounded_notes(reworded, NEEDLE_QUESTION, provenance) == []


@pytest.mark.parametrize(
    ("memory", "section"),
    [
        # the made-up two-hop note of stage sft29q's HotpotQA 16K early stop
        ("Penelope Lively was born in San Ramon Valley, California, and died in Manhattan.",
         "Arthur Conan Doyle was born in Edinburgh. He wrote detective stories."),
        # the right key with a value the section does not hold (sft29q's made-up "100")
        ("One of the special magic numbers for quiet-harbor is: 100.", NEEDLE),
        # a name the section does not hold, on a sentence that otherwise matches it
        ("Maria Lopez was born in San Ramon Valley, California.",
         "John Smith was born in San Ramon Valley, California."),
    ],
)  # fmt: skip
def test_notes_the_sections_do_not_hold_do_not_ground_an_exit(memory, section):
    from longread.citations.grounding import exit_grounded

    question = (
        NEEDLE_QUESTION
        if "magic" in memory
        else "Who was born first, Maria Lopez or "
        "Penelope Lively, and where in California was Lively born?"
    )
    assert not exit_grounded(memory, question, provenance_after((section, memory)))


def test_notes_about_nothing_the_question_asks_cannot_ground_an_exit():
    """Copied filler (stage sft29r exited on RULER's "The grass is green." and answered
    "green"): traced, but about nothing asked, so there is nothing to answer from."""
    from longread.citations.grounding import ungrounded_notes

    filler = "The grass is green. The sky is blue. The sun is yellow."
    provenance = provenance_after((filler, filler))
    assert ungrounded_notes(filler, NEEDLE_QUESTION, provenance) is None


async def test_a_grounded_exit_reads_on_past_made_up_notes_and_stops_at_the_evidence():
    replies = {SECTIONS[0]: "The code is 9999.", SECTIONS[1]: "The code is 4412."}
    config = {"exit_probe": True, "grounded_exit": True}
    backend = ScriptedBackend([probed(replies, ["yes", "yes"])] * 10)
    run = await agent_for(backend, **config).run("What is the code?", chunks(*SECTIONS))
    assert [s.kind for s in run.steps] == ["update", "probe", "update", "probe", "final"]
    assert GATE_EXIT_UNGROUNDED in run.steps[1].flags and GATE_EXIT not in run.steps[1].flags
    assert GATE_EXIT in run.steps[3].flags and run.config["chunks_read"] == 2
    assert any("1 exit(s) refused" in note for note in run.notes)
    # the papers' gate (grounded_exit off) stops on the made-up notes
    backend = ScriptedBackend([probed(replies, ["yes", "yes"])] * 10)
    run = await agent_for(backend, exit_probe=True).run("What is the code?", chunks(*SECTIONS))
    assert run.config["chunks_read"] == 1 and GATE_EXIT in run.steps[1].flags


RIVAL = "The special magic number for birch is 8056020."
ASKED = "The special magic number for dune is 4412001."
KEYED_QUESTION = "What is the special magic number for dune mentioned in the document?"


def test_given_the_key_an_exit_needs_a_note_naming_it():
    """Another key's needle, copied, is traced and shares the question's frame: without the
    key the probe's yes on it was honoured (niah_multikey_2 8K: 95% -> 15%, stop 70)."""
    from longread.citations.grounding import exit_grounded

    provenance = provenance_after((RIVAL, RIVAL), (ASKED, f"{RIVAL}\n{ASKED}"))
    assert exit_grounded(RIVAL, KEYED_QUESTION, provenance)  # no key: the tracing alone
    assert not exit_grounded(RIVAL, KEYED_QUESTION, provenance, frozenset({"dune"}))
    assert exit_grounded(ASKED, KEYED_QUESTION, provenance, frozenset({"dune"}))
    # the asked needle beside a rival's: the answer could take either number, so read on
    # (stop 70's first keyed exit answered with the rival's number in 1 of 20)
    both = f"{ASKED}\n{RIVAL}"
    assert not exit_grounded(both, KEYED_QUESTION, provenance, frozenset({"dune"}))
    # notes about nothing asked neither ground nor block it
    assert exit_grounded(f"Filler.\n{ASKED}", KEYED_QUESTION, provenance, frozenset({"dune"}))


async def test_a_grounded_exit_reads_past_another_keys_needle_to_the_asked_one():
    sections = [RIVAL, "Filler.", ASKED, "More filler."]
    replies = {RIVAL: RIVAL, ASKED: ASKED}
    config = {"exit_probe": True, "grounded_exit": True, "grounded_notes": True}
    backend = ScriptedBackend([probed(replies, ["yes", "yes"])] * 10)
    run = await agent_for(backend, **config).run(KEYED_QUESTION, chunks(*sections))
    probes = [s for s in run.steps if s.kind == "probe"]
    assert GATE_EXIT_UNGROUNDED in probes[0].flags  # the rival's note: refused
    assert GATE_EXIT in probes[1].flags and run.config["chunks_read"] == 3
    # stop 69's grounded exit (keyed_exit off), or stop 57's rule (no keys), stops on the
    # rival's needle
    for earlier in ({"keyed_exit": False}, {"question_keys": False}):
        backend = ScriptedBackend([probed(replies, ["yes", "yes"])] * 10)
        run = await agent_for(backend, **config, **earlier).run(KEYED_QUESTION, chunks(*sections))
        assert run.config["chunks_read"] == 1


FILLER_NUMBERS = "Convert a complex number to a floating point number first."
SHELF = "Old-pond is catalogued under shelf number 4412."
SHELF_QUESTION = "Under which shelf number is old-pond catalogued in the archive?"


async def test_a_grounded_exit_needs_a_note_restating_the_question():
    """Copied filler sharing one term with the question ("number") is traced and "about" it:
    the probe's yes on it stopped the held-out archive cell with the answer "+1" (stop 70).
    An exit now needs a note restating the question; stop 70's first exit took it."""
    sections = [FILLER_NUMBERS, "Filler.", SHELF, "More filler."]
    replies = {FILLER_NUMBERS: FILLER_NUMBERS, SHELF: SHELF}
    config = {"exit_probe": True, "grounded_exit": True}
    backend = ScriptedBackend([probed(replies, ["yes", "yes"])] * 10)
    run = await agent_for(backend, **config).run(SHELF_QUESTION, chunks(*sections))
    probes = [s for s in run.steps if s.kind == "probe"]
    assert GATE_EXIT_UNGROUNDED in probes[0].flags
    assert GATE_EXIT in probes[1].flags and run.config["chunks_read"] == 3
    backend = ScriptedBackend([probed(replies, ["yes", "yes"])] * 10)
    run = await agent_for(backend, **config, restated_exit=False).run(
        SHELF_QUESTION, chunks(*sections)
    )
    assert run.config["chunks_read"] == 1


async def test_a_grounded_exit_refuses_an_exit_tag_on_made_up_notes_too():
    replies = {SECTIONS[0]: "The code is 9999. <exit/>", SECTIONS[1]: "The code is 4412. <exit/>"}
    backend = ScriptedBackend([replies_by_section(replies)] * 10)
    agent = agent_for(backend, exit_gate=True, grounded_exit=True)
    run = await agent.run("What is the code?", chunks(*SECTIONS))
    assert GATE_EXIT_UNGROUNDED in run.steps[0].flags
    assert run.config["chunks_read"] == 2 and run.answer == "4412"


# --- grounded notes: made-up notes about the question are cut from the memory ------------


def test_only_the_made_up_notes_about_the_question_are_cut():
    from longread.citations.grounding import without_ungrounded

    section = f"The hills were quiet that year. {NEEDLE} Nobody came back."
    made_up = "The special magic number for quiet-harbor is no previous memory."
    memory = f"The hills were quiet that year.\n- {made_up}\n- {NEEDLE}"
    provenance = provenance_after((section, memory))
    kept, cut = without_ungrounded(memory, NEEDLE_QUESTION, provenance)
    assert cut == [made_up]
    # copied filler is about nothing asked and stays; the copied needle stays
    assert kept == f"The hills were quiet that year.\n- {NEEDLE}"
    assert without_ungrounded(kept, NEEDLE_QUESTION, provenance) == (kept, [])


def test_a_copy_padded_with_the_questions_phrasing_is_kept_and_a_made_up_value_cut():
    """The shipped adapter (stage 1e) writes the needle with the question's words inside:
    read section-first at 8K, grounded notes cut such a right answer before the padding was
    aligned without those words."""
    from longread.citations.grounding import without_ungrounded

    question = "What is the special magic number for quiet-harbor mentioned in the provided text?"
    section = f"The hills were quiet that year. {NEEDLE} Nobody came back."
    padded = "One of the special magic numbers for quiet-harbor mentioned in the provided text is"
    for value, kept in (("4076011", True), ("100", False)):
        note = f"{padded}: {value}."
        provenance = provenance_after((section, note), question=question)
        assert without_ungrounded(note, question, provenance) == (
            (note, []) if kept else ("", [note])
        )


async def test_grounded_notes_clear_a_made_up_answer_that_the_model_would_keep():
    """Stage sft29q at 2K: the first update turned the question into a made-up note ("... is
    no previous memory."), later updates kept it and skipped the needle. Cut, the memory is
    empty again when the needle comes, and the needle is copied."""
    made_up = "The code is no previous memory."

    def reply(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "\\boxed" in prompt:
            return "\\boxed{4412}" if "4412" in prompt else "\\boxed{none}"
        memory = prompt.split("Memory:\n", 1)[1].split("\n\nSection:", 1)[0]
        if memory == NO_MEMORY:  # an empty memory: the made-up note, or the needle copied
            return "The code is 4412." if "4412" in prompt else made_up
        return memory  # a model that keeps what it has

    question = "What is the code?"
    backend = ScriptedBackend([reply] * 10)
    run = await agent_for(backend, grounded_notes=True).run(question, chunks(*SECTIONS))
    assert NOTES_UNGROUNDED in run.steps[0].flags and run.steps[0].memory == NO_MEMORY
    assert run.steps[1].memory == "The code is 4412." and run.answer == "4412"
    assert any("cut from the memory" in note for note in run.notes)
    # the papers' memory keeps the made-up note to the end
    run = await agent_for(ScriptedBackend([reply] * 10)).run(question, chunks(*SECTIONS))
    assert run.steps[-2].memory == made_up and run.answer == "none"


# --- focused notes: a memory about nothing the question asks is cleared ------------------


def test_only_a_memory_with_no_note_about_the_question_is_unrelated():
    from longread.citations.grounding import unrelated_notes

    ledger = "What does lonely-flame's shelf number read in the ledger?"
    # sft29q's notes on a held-out wording: a sentence of the prose, kept to the end
    assert unrelated_notes("The memory is rebound if it is negative.", ledger)
    assert unrelated_notes("The grass is green.\n- The sky is blue.", NEEDLE_QUESTION)
    # one note about the question keeps the filler beside it (it may be a bridge)
    assert not unrelated_notes(f"The grass is green. {NEEDLE}", NEEDLE_QUESTION)
    assert not unrelated_notes("lonely-flame's shelf number reads 7055008.", ledger)
    assert not unrelated_notes("", NEEDLE_QUESTION)  # no notes: nothing to clear


async def test_focused_notes_clear_copied_filler_so_the_evidence_gets_in():
    """Stage 1e at 32K, sft29q on held-out wordings: the first update copied filler, later
    updates kept it and skipped the needle. Cleared, the memory is empty again when the needle
    comes, and the needle is copied."""

    def reply(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "\\boxed" in prompt:
            return "\\boxed{4412}" if "4412" in prompt else "\\boxed{Ann}"
        memory = prompt.split("Memory:\n", 1)[1].split("\n\nSection:", 1)[0]
        if memory == NO_MEMORY:  # an empty memory: the section's first sentence copied
            return prompt.split("Section:\n", 1)[1].split(".", 1)[0] + "."
        return memory  # a model that keeps what it has

    question = "What is the code?"
    run = await agent_for(ScriptedBackend([reply] * 10), focused_notes=True).run(
        question, chunks(*SECTIONS)
    )
    assert NOTES_UNRELATED in run.steps[0].flags and run.steps[0].memory == NO_MEMORY
    assert run.steps[1].memory == "The code is 4412." and NOTES_UNRELATED not in run.steps[1].flags
    assert run.answer == "4412"
    assert any("memory cleared" in note for note in run.notes)
    # the papers' memory keeps the filler to the end
    run = await agent_for(ScriptedBackend([reply] * 10)).run(question, chunks(*SECTIONS))
    assert run.steps[-2].memory == "Ann wrote it." and run.answer == "Ann"


# --- memreread's first pass reads with the gates (issue 29: options of memagent and of
# memreread's root pass) -------------------------------------------------------------------


async def test_memreread_s_root_pass_keeps_and_stops_by_the_gates_then_decides():
    def reply(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "Decide whether the memory is enough" in prompt:
            return "<stop/>"
        if "Section:\n" not in prompt:
            return "\\boxed{4412}"
        shown = prompt.split("Section:\n", 1)[1]
        return "Code 4412. <exit/>" if shown.startswith(SECTIONS[1]) else "<keep/>"

    backend = ScriptedBackend([reply] * 10)
    config = MemRereadConfig(update_gate=True, exit_gate=True)
    run = await MemReread(backend, WordTokenizer(), config).run(
        "What is the code?", chunks(*SECTIONS)
    )
    assert [s.kind for s in run.steps] == ["update", "update", "decide", "final"]
    assert GATE_KEEP in run.steps[0].flags and GATE_EXIT in run.steps[1].flags
    assert run.steps[1].memory == "Code 4412."  # the notes without the tag
    assert "Code 4412." in backend.requests[2][0][-1]["content"]  # the decision reads them
    assert run.answer == "4412"
