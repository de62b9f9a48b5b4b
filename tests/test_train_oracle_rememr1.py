"""Oracle ReMemR1 episodes (issue 28): an ideal reader that looks back. Replayed through
ReMemR1 itself, its replies give exactly its conversations, well formed, and its recall
brings back the fact the bridge needs."""

from __future__ import annotations

import asyncio

from longread.agents.rememr1 import ReMemR1, ReMemR1Config
from longread.data.chains import build_chains
from longread.trace import FORMAT_ERROR
from longread.train.oracle_rememr1 import rememr1_episode

from .scripted import ScriptedBackend, WordTokenizer
from .test_train_oracle_reread import NEEDLE_DOC
from .text_helpers import RegexTokenizer

CONFIG = ReMemR1Config(chunk_tokens=250, memory_tokens=160, final_tokens=16)


def episode(sample):
    agent = ReMemR1(ScriptedBackend([]), WordTokenizer(), CONFIG)
    return asyncio.run(rememr1_episode(agent, sample))


def replay(sample, turns):
    backend = ScriptedBackend([t.reply for t in turns])
    run = asyncio.run(
        ReMemR1(backend, WordTokenizer(), CONFIG).run(sample.question, sample.context)
    )
    return run, [messages for messages, _ in backend.requests]


def test_a_reversed_chain_notes_the_fact_in_passing_and_recalls_it_at_the_bridge():
    samples = build_chains(2500, 6, 0, RegexTokenizer())
    written = [(s, episode(s)) for s in samples]
    assert sum(turns is not None for _, turns in written) >= 5
    for sample, turns in written:
        if turns is None:
            continue
        fact, bridge = sample.meta["evidence"]
        run, sent = replay(sample, turns)
        assert sent == [t.messages for t in turns]
        assert run.answer == sample.answers[0]
        assert not any(FORMAT_ERROR in s.flags for s in run.steps)
        recalls = [s for s in run.steps if s.recall is not None]
        if fact_and_bridge_apart(run, fact, bridge):
            (recall,) = recalls  # asked once, at the bridge, naming its place
            assert sample.meta["bridge_entity"] in recall.recall.query
            assert fact in (recall.recall.memory or "")
            assert bridge in recall.memory and fact not in recall.memory
        else:
            assert not recalls
        updates = [s for s in run.steps if s.kind == "update"]
        fact_step = next(i for i, s in enumerate(updates) if fact in prompt_section(s))
        assert fact in updates[fact_step].memory  # noted in passing
        if fact_and_bridge_apart(run, fact, bridge) and fact_step + 1 < len(updates):
            assert fact not in updates[fact_step + 1].memory  # then dropped: nothing tied it


def fact_and_bridge_apart(run, fact: str, bridge: str) -> bool:
    sections = [prompt_section(s) for s in run.steps if s.kind == "update"]
    at = [
        next(i for i, text in enumerate(sections) if sentence in text)
        for sentence in (fact, bridge)
    ]
    return at[0] < at[1]


def prompt_section(step) -> str:
    return step.messages[0]["content"].split("Section:\n", 1)[1]


def test_forward_chains_and_needles_keep_the_evidence_and_recall_nothing():
    from longread.data.records import Sample

    samples = build_chains(2500, 3, 1, RegexTokenizer(), order="forward")
    samples.append(Sample("n", "What is the special magic number?", NEEDLE_DOC, ["4720519"]))
    for sample in samples:
        turns = episode(sample)
        run, sent = replay(sample, turns)
        assert sent == [t.messages for t in turns] and run.answer == sample.answers[0]
        assert not any(s.recall for s in run.steps)
        assert not any(FORMAT_ERROR in s.flags for s in run.steps)


def test_without_thoughts_the_replies_start_at_update_and_read_the_same():
    """`run.rememr1_thoughts = false`: no reason sentence, the same notes and recalls, so the
    agent reads the same conversations and answers the same."""
    samples = build_chains(2500, 4, 0, RegexTokenizer())
    agent = ReMemR1(ScriptedBackend([]), WordTokenizer(), CONFIG)
    for sample in samples:
        with_thoughts = asyncio.run(rememr1_episode(agent, sample))
        turns = asyncio.run(rememr1_episode(agent, sample, thoughts=False))
        if turns is None:
            assert with_thoughts is None
            continue
        updates = [t.reply for t in turns if t.kind == "update"]
        assert all(reply.startswith("<update>") for reply in updates)
        assert updates == [
            t.reply.split("\n", 1)[1] for t in with_thoughts or [] if t.kind == "update"
        ]
        run, sent = replay(sample, turns)
        assert sent == [t.messages for t in turns] and run.answer == sample.answers[0]
        assert not any(FORMAT_ERROR in s.flags for s in run.steps)


def test_sft_rows_of_rememr1_hold_its_tags(tmp_path):
    """`run.objective = "sft"` with agent rememr1 is accepted, and its rows teach the format:
    every step an <update>, the bridge's step a <recall>."""
    import pytest

    pytest.importorskip("torch")
    from longread.agents import make_agent, make_config
    from longread.errors import UsageError
    from longread.train.config import ModelSection, TrainConfig
    from longread.train.oracle import oracle_rows
    from longread.train.policy import PolicyBackend
    from longread.train.session import load_policy, policy_tokenizer

    from .tiny_policy import build_tiny_policy_folder

    raw = {
        "data": {"train": ["x.jsonl"]},
        "agent": {"name": "rememr1"},
        "run": {"objective": "sft"},
    }
    TrainConfig.from_dict(raw)
    raw["run"]["section_first_share"] = 0.5
    with pytest.raises(UsageError, match="no section-first order"):
        TrainConfig.from_dict(raw)
    raw["run"] = {"objective": "sft", "rememr1_thoughts": False}
    TrainConfig.from_dict(raw)
    with pytest.raises(UsageError, match="rememr1_thoughts = false"):
        TrainConfig.from_dict({**raw, "agent": {"name": "memagent"}})
    policy = load_policy(ModelSection(path=str(build_tiny_policy_folder(tmp_path)), lora=False), 0)
    config = make_config("rememr1", chunk_tokens=250, memory_tokens=200, final_tokens=16)
    agent = make_agent("rememr1", PolicyBackend(policy), policy_tokenizer(policy), config)
    rows = oracle_rows(agent, policy, build_chains(1500, 3, 0, RegexTokenizer()))
    replies = [policy.tokenizer.decode(r.completion_ids) for r in rows if not r.is_final]
    assert replies and all("<update>" in r and "</update>" in r for r in replies)
    assert any("<recall>" in r for r in replies)


def test_noisy_and_made_up_notes_are_shown_and_the_reply_keeps_the_clean_memory():
    """`run.noisy_notes` and `run.false_claims` with rememr1: a step after the first is shown
    its memory with filler or a made-up note added (the question's frame with no value, as
    sft28q wrote at the first section, or a wrong value); the ideal reply is unchanged, and
    no made-up note holds the gold answer."""
    import random

    from longread.data.records import Sample

    sample = Sample(
        "n", "What is the special magic number for old-pond mentioned in the provided text?",
        NEEDLE_DOC, ["4720519"],
    )  # fmt: skip
    agent = ReMemR1(ScriptedBackend([]), WordTokenizer(), CONFIG)
    clean = asyncio.run(rememr1_episode(agent, sample))
    slipped = asyncio.run(
        rememr1_episode(agent, sample, noise_rate=1.0, claim_rate=1.0, rng=random.Random(4))
    )
    assert [t.reply for t in slipped] == [t.reply for t in clean]
    shown = [memory_shown(t) for t in slipped if t.kind == "update"]
    clean_shown = [memory_shown(t) for t in clean if t.kind == "update"]
    assert shown[0] == clean_shown[0] == "No previous memory"
    assert all(s != c for s, c in zip(shown[1:], clean_shown[1:], strict=True))
    frame = "The special magic number for old-pond mentioned in the provided text."
    assert any(frame in s for s in shown)  # the frame a warm start made up
    made_up = [s.replace(c, "") for s, c in zip(shown, clean_shown, strict=True)]
    assert not any("4720519" in note for note in made_up)
    assert slipped[0].from_empty and not slipped[1].from_empty


def memory_shown(turn) -> str:
    """The current memory a step prompt shows (between its headings)."""
    content = turn.messages[0]["content"]
    return content.split("Current memory:\n", 1)[1].split("\n\nSection:", 1)[0]
