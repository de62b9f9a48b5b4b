"""The warm start: oracle memagent episodes and supervised steps on them (tiny random Llama)."""

from __future__ import annotations

import asyncio
import json
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")  # the 'train' extra; `make install` always installs it

from longread.agents import make_agent, make_config  # noqa: E402
from longread.agents.memagent import NO_MEMORY  # noqa: E402
from longread.data.evidence import evidence_sentences  # noqa: E402
from longread.data.records import Sample  # noqa: E402
from longread.errors import UsageError  # noqa: E402
from longread.train.config import ModelSection, TrainConfig  # noqa: E402
from longread.train.oracle import (  # noqa: E402
    false_claim,
    oracle_episode,
    oracle_rows,
)
from longread.train.policy import PolicyBackend  # noqa: E402
from longread.train.session import load_policy, policy_tokenizer  # noqa: E402
from longread.train.trainer import METRICS_FILE  # noqa: E402

from .test_train_trainer import make_trainer, tiny_config  # noqa: E402
from .tiny_policy import build_tiny_policy_folder, two_chunk_samples  # noqa: E402

NEEDLE = "The special magic number is 4810."


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_policy_folder(tmp_path_factory.mktemp("tiny") / "model")


def sample() -> Sample:
    row = two_chunk_samples(1)[0]
    return Sample(row["id"], row["question"], row["context"], row["answers"])  # type: ignore[arg-type]


def test_evidence_is_the_sentence_holding_the_answer_or_the_listed_one() -> None:
    assert evidence_sentences(sample()) == [NEEDLE]
    listed = Sample("x", "q?", "A b. C d.", ["zzz"], {"evidence": ["C d."]})
    assert evidence_sentences(listed) == ["C d."]


def test_oracle_episode_keeps_the_needle_from_the_chunk_that_holds_it(tiny_model: Path) -> None:
    policy = load_policy(ModelSection(path=str(tiny_model), lora=False), seed=0)
    config = make_config("memagent", chunk_tokens=250, memory_tokens=32, prompt_set="notes")
    agent = make_agent("memagent", PolicyBackend(policy), policy_tokenizer(policy), config)
    turns = asyncio.run(oracle_episode(agent, sample()))
    assert [t.kind for t in turns] == ["update", "update", "final"]
    first_chunk = turns[0].messages[0]["content"]
    # The needle sits mid-document: the chunk that holds it gets it added, the notes carry on.
    expected = [NEEDLE, NEEDLE] if NEEDLE in first_chunk else [NO_MEMORY, NEEDLE]
    assert [t.reply for t in turns[:2]] == expected
    assert NEEDLE in turns[2].messages[0]["content"]  # the final call reads the notes
    assert turns[2].reply == "\\boxed{4810}"
    rows = oracle_rows(agent, policy, [sample()])
    eos = policy.tokenizer.eos_token_id
    assert [r.completion_ids[-1] for r in rows] == [eos, eos, eos]
    assert rows[2].prompt_ids == policy.prompt_ids(turns[2].messages)
    assert policy.tokenizer.decode(rows[2].completion_ids[:-1]) == "\\boxed{4810}"


def sft_config(tiny_model: Path, tmp_path: Path, steps: int) -> dict:
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in two_chunk_samples(2)))
    raw = tiny_config(tiny_model, data, steps=steps)
    raw["run"]["objective"] = "sft"
    raw["agent"].update(memory_tokens=32, final_tokens=16)
    return raw


def test_sft_steps_lower_the_loss_on_the_oracle_replies(tiny_model: Path, tmp_path: Path) -> None:
    # 8 steps: the tiny tokenizer is trained on the bundled prompt files, so a new prompt file
    # changes its vocabulary and the curve's early wiggles; over 8 steps the fall is wide
    # (about 40% at lr 0.01) whatever the vocabulary, where 5 steps sat at the threshold.
    raw = sft_config(tiny_model, tmp_path, steps=8)
    raw["model"]["lora"] = False  # a tiny random model learns fast only with every weight
    raw["optim"]["lr"] = 0.01
    trainer = make_trainer(TrainConfig.from_dict(raw), tmp_path / "run")
    trainer.run()
    lines = [json.loads(x) for x in (trainer.out / METRICS_FILE).read_text().splitlines()]
    assert [x["objective"] for x in lines] == ["sft"] * 8
    # Both samples are seen every step (2 questions a step, 2 samples): the loss must fall.
    assert lines[-1]["loss"] < lines[0]["loss"] * 0.8


def test_a_grpo_stage_starts_from_the_sft_adapter(tiny_model: Path, tmp_path: Path) -> None:
    raw = sft_config(tiny_model, tmp_path, steps=1)
    raw["optim"]["lr"] = 0.05
    sft = make_trainer(TrainConfig.from_dict(raw), tmp_path / "sft")
    sft.run()
    raw["run"]["objective"] = "grpo"
    raw["model"]["adapter"] = str(sft.out / "adapter")
    grpo = make_trainer(TrainConfig.from_dict(raw), tmp_path / "grpo")
    warm = dict(sft.policy.model.named_parameters())
    lora_b = [(n, p) for n, p in grpo.policy.model.named_parameters() if "lora_B" in n]
    assert lora_b and all(p.requires_grad for _, p in lora_b)
    assert all(torch.equal(p, warm[n]) for n, p in lora_b)
    assert any(p.abs().sum() > 0 for _, p in lora_b)  # the warm start, not a fresh LoRA


def test_the_kl_reference_of_a_warm_start_is_the_starting_adapter(
    tiny_model: Path, tmp_path: Path
) -> None:
    """Continued from an sft adapter, the policy at step 1 is the starting adapter: its KL to
    the reference must be 0 (the base model without the adapter is another policy)."""
    raw = sft_config(tiny_model, tmp_path, steps=1)
    raw["optim"]["lr"] = 0.05
    sft = make_trainer(TrainConfig.from_dict(raw), tmp_path / "sft")
    sft.run()
    raw["run"].update(objective="grpo", steps=2)
    raw["model"]["adapter"] = str(sft.out / "adapter")
    raw["optim"].update(kl_coef=0.5, minibatches=1)  # step 1's KL: before any update
    grpo = make_trainer(TrainConfig.from_dict(raw), tmp_path / "grpo")
    grpo.run()
    kls = [json.loads(x)["kl"] for x in (grpo.out / METRICS_FILE).read_text().splitlines()]
    assert kls[0] == pytest.approx(0.0, abs=1e-6)
    assert kls[1] > 0.0  # one update later the policy has moved from it
    # The reference swap leaves the trained weights in place.
    trained = dict(grpo.policy.model.named_parameters())
    start = dict(make_trainer(TrainConfig.from_dict(raw), tmp_path / "b").policy.model
                 .named_parameters())  # fmt: skip
    assert any(not torch.equal(p, start[n]) for n, p in trained.items() if "lora_B" in n)


def test_evidence_weight_multiplies_the_rows_that_take_in_evidence(tiny_model: Path) -> None:
    policy = load_policy(ModelSection(path=str(tiny_model), lora=False), seed=0)
    config = make_config("memagent", chunk_tokens=250, memory_tokens=32, prompt_set="notes")
    agent = make_agent("memagent", PolicyBackend(policy), policy_tokenizer(policy), config)
    turns = asyncio.run(oracle_episode(agent, sample()))
    rows = oracle_rows(agent, policy, [sample()], evidence_weight=3.0)
    # the one update whose section holds the needle is weighted; keeping notes and answering not
    needle_first = turns[0].reply == NEEDLE
    assert [t.takes_evidence for t in turns] == [needle_first, not needle_first, False]
    assert sorted(r.weight for r in rows) == [1.0, 1.0, 3.0]
    assert {r.advantage for r in rows} == {0.0}  # supervised rows carry no advantage


def test_the_sft_loss_weights_each_row_by_its_weight(tiny_model: Path, tmp_path: Path) -> None:
    """With every row weighted 2, the loss is twice the plain token mean, exactly."""
    raw = sft_config(tiny_model, tmp_path, steps=1)
    trainer = make_trainer(TrainConfig.from_dict(raw), tmp_path / "run")
    rows = oracle_rows(trainer.oracle_agent(), trainer.policy, [sample()])
    plain, _ = trainer.updater.supervised_update(rows)
    trainer.policy.model.load_state_dict(make_trainer(TrainConfig.from_dict(raw), tmp_path / "b")
                                         .policy.model.state_dict())  # fmt: skip
    doubled = [replace(r, weight=2.0) for r in rows]
    weighted, _ = trainer.updater.supervised_update(doubled)
    assert weighted == pytest.approx(2 * plain, rel=1e-5)


def test_gradient_checkpointing_changes_memory_not_the_step(
    tiny_model: Path, tmp_path: Path
) -> None:
    """optim.gradient_checkpointing recomputes activations in the backward: the same loss,
    gradient norm and weights after the step as the plain backward (float rounding apart)."""
    raw = sft_config(tiny_model, tmp_path, steps=1)
    plain = make_trainer(TrainConfig.from_dict(raw), tmp_path / "plain")
    raw["optim"]["gradient_checkpointing"] = True
    saving = make_trainer(TrainConfig.from_dict(raw), tmp_path / "saving")
    base = saving.policy.model.base_model.model
    assert getattr(base, "is_activation_checkpointing", None) or base.is_gradient_checkpointing
    rows = oracle_rows(plain.oracle_agent(), plain.policy, [sample()])
    results = [t.updater.supervised_update(rows) for t in (plain, saving)]
    assert results[1] == pytest.approx(results[0], rel=1e-5)
    after = [dict(t.policy.model.named_parameters()) for t in (plain, saving)]
    changed = 0
    for name, weight in after[0].items():
        if weight.requires_grad:
            torch.testing.assert_close(after[1][name], weight, rtol=1e-5, atol=1e-6)
            changed += 1
    assert changed  # the LoRA weights were compared, and they moved in both (lr 0.05)


def filler_sample() -> Sample:
    """Three-plus sections of numbered filler sentences, the needle in the second half."""
    filler = [f"Filler line {i} about the hills." for i in range(48)]
    context = " ".join([*filler[:30], NEEDLE, *filler[30:]])
    return Sample("f", "What is the special magic number?", context, ["4810"])


def shown_notes(turn_messages: list, clean_messages: list, clean_notes: str) -> str:
    """The notes an update prompt shows, cut out of it by the clean prompt around them."""
    clean, noisy = clean_messages[0]["content"], turn_messages[0]["content"]
    prefix, suffix = clean.split(clean_notes, 1)
    assert noisy.startswith(prefix) and noisy.endswith(suffix)
    return noisy[len(prefix) : len(noisy) - len(suffix)]


def test_noisy_notes_add_earlier_filler_and_keep_the_ideal_reply(tiny_model: Path) -> None:
    policy = load_policy(ModelSection(path=str(tiny_model), lora=False), seed=0)
    config = make_config("memagent", chunk_tokens=250, memory_tokens=64, prompt_set="notes")
    agent = make_agent("memagent", PolicyBackend(policy), policy_tokenizer(policy), config)
    clean = asyncio.run(oracle_episode(agent, filler_sample()))
    noisy = asyncio.run(oracle_episode(agent, filler_sample(), 1.0, random.Random(5)))
    updates = [t for t in clean if t.kind == "update"]
    assert len(updates) >= 3
    # The ideal replies are the clean notes: noise is what the policy might have written.
    assert [t.reply for t in noisy] == [t.reply for t in clean]
    assert noisy[0].messages == clean[0].messages  # nothing read yet: nothing to copy
    for index in range(1, len(updates)):
        clean_notes = updates[index - 1].reply
        shown = shown_notes(noisy[index].messages, clean[index].messages, clean_notes)
        added = shown if clean_notes == NO_MEMORY else shown.replace(clean_notes, "", 1)
        assert shown != clean_notes and (clean_notes == NO_MEMORY or clean_notes in shown)
        sentences = [s for s in re.split(r"(?<=\.)\s+", added.strip()) if s]
        read_before = " ".join(t.messages[0]["content"] for t in clean[:index])
        for sentence in sentences:
            assert sentence.startswith("Filler line") and sentence != NEEDLE
            assert sentence in read_before  # copied from a section already read
        assert sentences and len(sentences) <= 6
    # no noise: exactly the clean episode
    quiet = asyncio.run(oracle_episode(agent, filler_sample(), 0.0, random.Random(5)))
    assert [t.messages for t in quiet] == [t.messages for t in clean]


@pytest.mark.parametrize("option", ["noisy_notes", "false_claims"])
def test_noise_options_are_chances(option: str) -> None:
    raw = {"data": {"train": ["x.jsonl"]}, "run": {"objective": "sft", option: 1.5}}
    with pytest.raises(UsageError, match=option):
        TrainConfig.from_dict(raw)


def test_a_false_claim_answers_in_the_questions_words_with_a_wrong_value() -> None:
    rng = random.Random(3)
    question = "What is the special magic number for damp-chair mentioned in the provided text?"
    claims = [false_claim(question, ["4405858"], rng) for _ in range(40)]
    prefix = "The special magic number for damp-chair mentioned in the provided text is "
    values = [c.removeprefix(prefix).removesuffix(".") for c in claims]
    assert all(c.startswith(prefix) for c in claims)
    assert all(v.isdigit() and v != "4405858" for v in values)
    assert {len(v) for v in values} >= {7, 1}  # the gold's length, and small made-up numbers
    other = false_claim("Who directed Flyboys?", ["Tony Bill"], rng)
    assert other.startswith("The answer is ") and "Tony Bill" not in other


def test_false_claims_show_a_made_up_answer_and_keep_the_ideal_reply(tiny_model: Path) -> None:
    policy = load_policy(ModelSection(path=str(tiny_model), lora=False), seed=0)
    config = make_config("memagent", chunk_tokens=250, memory_tokens=64, prompt_set="notes")
    agent = make_agent("memagent", PolicyBackend(policy), policy_tokenizer(policy), config)
    clean = asyncio.run(oracle_episode(agent, filler_sample()))
    claimed = asyncio.run(
        oracle_episode(agent, filler_sample(), 0.0, random.Random(5), claim_rate=1.0)
    )
    updates = [t for t in clean if t.kind == "update"]
    # the ideal replies drop the claim: an answer the document has not given is not kept
    assert [t.reply for t in claimed] == [t.reply for t in clean]
    assert claimed[0].messages == clean[0].messages
    for index in range(1, len(updates)):
        clean_notes = updates[index - 1].reply
        shown = shown_notes(claimed[index].messages, clean[index].messages, clean_notes)
        claim = shown if clean_notes == NO_MEMORY else shown.replace(clean_notes, "", 1).strip()
        assert re.fullmatch(r"The special magic number is \d+\.", claim)
        assert claim != NEEDLE


def test_update_share_keeps_evidence_and_answers_and_a_share_of_the_rest(
    tiny_model: Path,
) -> None:
    """State-reset rows: a long document's late memory states are trained on without one row
    per section. The kept rows are exactly the full episode's rows at those places."""
    policy = load_policy(ModelSection(path=str(tiny_model), lora=False), seed=0)
    config = make_config("memagent", chunk_tokens=60, memory_tokens=64, prompt_set="notes")
    agent = make_agent("memagent", PolicyBackend(policy), policy_tokenizer(policy), config)
    samples = [filler_sample()] * 20
    every = oracle_rows(agent, policy, samples, evidence_weight=3.0)
    some = oracle_rows(agent, policy, samples, 3.0, rng=random.Random(1), update_share=0.25)
    per_sample = len(every) // 20
    assert per_sample >= 6  # several sections without the needle
    finals = [r for r in some if r.is_final]
    evidence = [r for r in some if r.weight == 3.0]
    others = [r for r in some if not r.is_final and r.weight == 1.0]
    assert len(finals) == 20 and len(evidence) == 20  # never dropped
    plain_updates = 20 * (per_sample - 2)
    assert 0.1 * plain_updates < len(others) < 0.4 * plain_updates
    full = {(r.step, tuple(r.prompt_ids)): r.completion_ids for r in every}
    for row in some:  # the memory a kept row shows is the one its place gives
        assert full[(row.step, tuple(row.prompt_ids))] == row.completion_ids
    whole = oracle_rows(agent, policy, samples[:2], 3.0, rng=random.Random(1), update_share=1.0)
    assert len(whole) == 2 * per_sample


def test_keep_empty_updates_keeps_every_update_before_the_evidence(tiny_model: Path) -> None:
    """With the share drawn, the updates shown empty notes (before the needle) all stay: the
    place where a model learns not to make an answer up."""
    policy = load_policy(ModelSection(path=str(tiny_model), lora=False), seed=0)
    config = make_config("memagent", chunk_tokens=60, memory_tokens=64, prompt_set="notes")
    agent = make_agent("memagent", PolicyBackend(policy), policy_tokenizer(policy), config)
    samples = [filler_sample()] * 10
    every = oracle_rows(agent, policy, samples, evidence_weight=3.0)
    kept = oracle_rows(
        agent, policy, samples, 3.0, rng=random.Random(1), update_share=0.25,
        keep_empty_updates=True,
    )  # fmt: skip
    turns = asyncio.run(oracle_episode(agent, filler_sample()))
    before = next(i for i, t in enumerate(turns) if t.takes_evidence)
    assert before >= 2 and not any(t.takes_evidence for t in turns[before + 1 : -1])
    steps = [r.step for r in kept]
    for step in range(before + 1):  # every empty-notes update and the evidence one
        assert steps.count(step) == 10
    assert len(kept) < len(every)  # the later updates are still drawn


def test_update_share_is_a_share() -> None:
    raw = {"data": {"train": ["x.jsonl"]}, "run": {"objective": "sft", "update_share": 0}}
    TrainConfig.from_dict(raw)  # 0: evidence updates and answers only
    raw["run"]["update_share"] = 1.2
    with pytest.raises(UsageError, match="update_share"):
        TrainConfig.from_dict(raw)


def test_section_first_share_writes_that_share_of_episodes_in_the_other_order(
    tiny_model: Path,
) -> None:
    """One adapter for both reading orders: the section-first episodes put the section before
    the problem, as MemAgent(section_first=True) asks, with the same ideal replies."""
    policy = load_policy(ModelSection(path=str(tiny_model), lora=False), seed=0)
    config = make_config("memagent", chunk_tokens=250, memory_tokens=32, prompt_set="paper")
    agent = make_agent("memagent", PolicyBackend(policy), policy_tokenizer(policy), config)
    first = make_config("memagent", chunk_tokens=250, memory_tokens=32, section_first=True)
    reader = make_agent("memagent", PolicyBackend(policy), policy_tokenizer(policy), first)
    paper = asyncio.run(oracle_episode(agent, sample()))
    flipped = asyncio.run(oracle_episode(reader, sample()))
    assert [t.reply for t in paper] == [t.reply for t in flipped]
    assert paper[0].messages != flipped[0].messages
    rows = oracle_rows(agent, policy, [sample()] * 40, rng=random.Random(2),
                       section_first_share=0.5)  # fmt: skip
    first_prompts = {tuple(policy.prompt_ids(t.messages)) for t in flipped if t.kind == "update"}
    paper_prompts = {tuple(policy.prompt_ids(t.messages)) for t in paper if t.kind == "update"}
    updates = [tuple(r.prompt_ids) for r in rows if not r.is_final]
    in_first = sum(ids in first_prompts for ids in updates)
    assert in_first + sum(ids in paper_prompts for ids in updates) == len(updates)
    assert 0.3 * len(updates) < in_first < 0.7 * len(updates)


def test_chunk_choices_cut_episodes_at_each_size(tiny_model: Path, tmp_path: Path) -> None:
    """An adapter meant to read larger sections sees them: each sample's episode is cut at a
    size drawn from agent.chunk_tokens and run.chunk_choices, the ideal notes the same."""
    raw = sft_config(tiny_model, tmp_path, steps=1)
    raw["agent"].update(chunk_tokens=100, memory_tokens=64)
    raw["run"]["chunk_choices"] = [250]
    trainer = make_trainer(TrainConfig.from_dict(raw), tmp_path / "run")
    small, large = trainer.oracle_agent(), trainer.oracle_agent(250)
    assert (small.config.chunk_tokens, large.config.chunk_tokens) == (100, 250)
    rows = oracle_rows(small, trainer.policy, [sample()] * 30, rng=random.Random(4),
                       other_agents=[large])  # fmt: skip
    per_sample = [len(asyncio.run(oracle_episode(a, sample()))) for a in (small, large)]
    assert per_sample[0] > per_sample[1]  # smaller chunks, more updates
    finals = [i for i, r in enumerate(rows) if r.is_final]
    lengths = {b - a for a, b in zip([-1, *finals], finals, strict=False)}
    assert lengths == set(per_sample)  # both cuts drawn
    with pytest.raises(UsageError, match="chunk_choices"):
        TrainConfig.from_dict({"data": {"train": ["x"]}, "run": {"chunk_choices": [0]}})
