"""Oracle MemReread episodes (issue 28): the conversations of an ideal rereading reader are
exactly the conversations MemReread has, so a warm start on them teaches its formats."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

from longread.agents.memreread import MemReread, MemRereadConfig
from longread.data.chains import build_chains
from longread.data.loaders import load_samples, save_samples
from longread.data.records import Sample
from longread.train.oracle_reread import reread_episode

from .scripted import ScriptedBackend, WordTokenizer
from .text_helpers import RegexTokenizer

CONFIG = MemRereadConfig(chunk_tokens=250, memory_tokens=128, final_tokens=16)


NEEDLE_DOC = " ".join(
    [f"Filler line {i} about the hills." for i in range(200)][:120]
    + ["The special magic number is 4720519."]
    + [f"Filler line {i} about the hills." for i in range(120, 200)]
)


def agent(config: MemRereadConfig = CONFIG) -> MemReread:
    return MemReread(ScriptedBackend([]), WordTokenizer(), config)


def episode(sample, config: MemRereadConfig = CONFIG):
    return asyncio.run(reread_episode(agent(config), sample))


def replay(sample, turns, config: MemRereadConfig = CONFIG):
    """MemReread itself, answering every call with the oracle's reply: what it sends."""
    backend = ScriptedBackend([t.reply for t in turns])
    reader = MemReread(backend, WordTokenizer(), config)
    run = asyncio.run(reader.run(sample.question, sample.context))
    return run, [messages for messages, _ in backend.requests]


def test_a_reversed_chain_asks_the_hop_rereads_for_it_and_answers():
    for sample in build_chains(2000, 3, 0, RegexTokenizer()):
        turns = episode(sample)
        fact, bridge = sample.meta["evidence"]
        kinds = [t.kind for t in turns]
        first_decide = kinds.index("decide")
        root, rest = turns[:first_decide], turns[first_decide:]
        assert {t.kind for t in root} == {"update"} and len(root) > 3
        assert root[-1].reply == bridge  # a forward reader cannot know the fact mattered
        assert rest[0].reply == f"<subquestion>{sample.meta['sub_question']}</subquestion>"
        reread = [t for t in rest if t.kind == "update"]
        assert len(reread) == len(root) and reread[-1].reply == fact
        integrate = next(t for t in rest if t.kind == "integrate")
        assert integrate.reply == f"{bridge} {fact}"
        assert [t.kind for t in rest[-2:]] == ["decide", "final"]
        assert rest[-2].reply == "<stop/>" and rest[-1].reply == f"\\boxed{{{sample.answers[0]}}}"
        run, sent = replay(sample, turns)
        assert sent == [t.messages for t in turns]  # the agent's own conversations, in order
        assert run.answer == sample.answers[0]
        assert [s.kind for s in run.steps].count("integrate") == 1


def test_a_forward_chain_a_chain_in_one_section_or_a_needle_stops_at_once():
    """The bridge came first (or with the fact), or there is no hop: the root notes hold the
    answer, and there is nothing to reread."""
    whole = replace(CONFIG, chunk_tokens=2000)  # a 600-token chain is one section
    forward = build_chains(2000, 2, 1, RegexTokenizer(), order="forward")
    one_section = build_chains(600, 2, 2, RegexTokenizer(), distractors=0)
    needle = Sample("n", "What is the special magic number?", NEEDLE_DOC, ["4720519"])
    cases = [(s, CONFIG) for s in [*forward, needle]] + [(s, whole) for s in one_section]
    for sample, config in cases:
        turns = episode(sample, config)
        assert [t.kind for t in turns[-2:]] == ["decide", "final"]
        assert [t.reply for t in turns if t.kind == "decide"] == ["<stop/>"]
        run, sent = replay(sample, turns, config)
        assert sent == [t.messages for t in turns] and run.answer == sample.answers[0]


TWO_ROUNDS = replace(CONFIG, max_reread=2)
ONE_ROUND = replace(CONFIG, max_reread=1)


def test_a_missed_bridge_asks_the_first_hop_then_the_place_s_code():
    """With first hops, the decision is shown root notes that missed the bridge and asks where
    the item went; the reread keeps the bridge and boxes the place, and the second decision,
    shown it, asks the place's code, whose reread finds the answer."""
    for sample in build_chains(2000, 3, 0, RegexTokenizer()):
        fact, bridge = sample.meta["evidence"]
        turns = asyncio.run(reread_episode(agent(TWO_ROUNDS), sample, first_hop=1.0))
        decides = [t for t in turns if t.kind == "decide"]
        assert len(decides) == 2  # max_reread rounds, then the final answer
        shown = decides[0].messages[0]["content"]
        assert bridge not in shown and fact not in shown
        assert decides[0].reply.startswith("<subquestion>")
        assert sample.meta["item"] in decides[0].reply
        finals = [t.reply for t in turns if t.kind == "final"]
        place, code = sample.meta["bridge_entity"], sample.answers[0]
        assert finals == [f"\\boxed{{{place}}}", f"\\boxed{{{code}}}", f"\\boxed{{{code}}}"]
        integrates = [t.reply for t in turns if t.kind == "integrate"]
        assert bridge in integrates[0] and fact not in integrates[0]
        assert bridge in integrates[1] and fact in integrates[1]
        second = decides[1].messages[0]["content"]
        assert bridge in second and place in second  # the first hop's answer is in its history
        assert decides[1].reply == f"<subquestion>{sample.meta['sub_question']}</subquestion>"
        # run.followup_weight weighs the second decision: the one a warm start got wrong
        assert [d.follows_up for d in decides] == [False, True]


def test_first_hops_change_no_episode_when_off_or_with_one_reread():
    """Earlier stages resume with the same rows: no first hop, no extra draw."""
    for sample in build_chains(2000, 2, 4, RegexTokenizer()):
        for config, first_hop in ((TWO_ROUNDS, 0.0), (ONE_ROUND, 1.0)):
            plain = asyncio.run(reread_episode(agent(config), sample))
            hops = asyncio.run(reread_episode(agent(config), sample, first_hop=first_hop))
            assert [(t.messages, t.reply) for t in hops] == [(t.messages, t.reply) for t in plain]


def test_sft_on_memreread_trains_its_decisions_and_integrations(tmp_path):
    """`run.objective = "sft"` with agent memreread: the rows hold the decide and integrate
    conversations too, each capped at its own budget, and a step lowers their loss."""
    pytest.importorskip("torch")
    from longread.train.config import TrainConfig
    from longread.train.oracle import oracle_rows
    from longread.train.trainer import METRICS_FILE

    from .test_train_trainer import make_trainer
    from .tiny_policy import build_tiny_policy_folder

    model = build_tiny_policy_folder(tmp_path / "model")
    data = tmp_path / "chains.jsonl"
    save_samples(build_chains(1200, 2, 0, RegexTokenizer()), data)
    raw = {
        "model": {"path": str(model), "lora": False},
        "agent": {"name": "memreread", "chunk_tokens": 250, "memory_tokens": 48,
                  "final_tokens": 8, "options": {"decide_tokens": 12}},
        "data": {"train": [str(data)]},
        "rollout": {"questions": 2},
        "optim": {"lr": 0.01, "micro_batch": 4},
        "run": {"objective": "sft", "steps": 2, "seed": 3},
    }  # fmt: skip
    trainer = make_trainer(TrainConfig.from_dict(raw), tmp_path / "run")
    rows = oracle_rows(trainer.oracle_agent(), trainer.policy, load_samples(data))
    decode = trainer.policy.tokenizer.decode
    decides = [r for r in rows if "Decide whether the memory is enough" in decode(r.prompt_ids)]
    replies = [decode(r.completion_ids) for r in decides]
    assert all(len(r.completion_ids) <= 12 for r in decides)  # decide_tokens
    assert any(d.startswith("<subquestion>") for d in replies)
    assert any(d.startswith("<stop/>") for d in replies)
    assert any("You reread the whole document" in decode(r.prompt_ids) for r in rows)
    # row_kinds: the same decisions and integrations, and nothing else
    kinds = ("decide", "integrate")
    only = oracle_rows(trainer.oracle_agent(), trainer.policy, load_samples(data), row_kinds=kinds)
    integrates = [r for r in rows if "You reread the whole document" in decode(r.prompt_ids)]
    wanted = [r.prompt_ids for r in rows if r in decides or r in integrates]
    assert [r.prompt_ids for r in only] == wanted and integrates
    # run.followup_weight: a decision asked after a round weighs that times the others
    two = replace(trainer.oracle_agent().config, max_reread=2)
    reader = MemReread(trainer.oracle_agent().backend, trainer.oracle_agent().tokenizer, two)
    weighed = oracle_rows(
        reader, trainer.policy, load_samples(data), first_hop=1.0, decision_weight=3.0,
        followup_weight=2.0, row_kinds=["decide"],
    )  # fmt: skip
    first = [r.weight for r in weighed if "(none yet)" in decode(r.prompt_ids)]
    after = [r.weight for r in weighed if "(none yet)" not in decode(r.prompt_ids)]
    assert set(first) == {3.0} and set(after) == {6.0} and len(after) == len(first)
    trainer.run()
    lines = [json.loads(x) for x in (trainer.out / METRICS_FILE).read_text().splitlines()]
    assert lines[-1]["loss"] < lines[0]["loss"]  # both samples every step
