"""State-reset episodes and dynamic sampling in the CPU trainer (tiny random Llama)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")  # the 'train' extra; `make install` always installs it

from longread.data.records import Sample  # noqa: E402
from longread.errors import UsageError  # noqa: E402
from longread.train.checkpoint import Position  # noqa: E402
from longread.train.config import TrainConfig  # noqa: E402
from longread.train.rollouts import reset_state_record  # noqa: E402

from .test_train_trainer import make_trainer, tiny_config  # noqa: E402
from .tiny_policy import build_tiny_policy_folder, two_chunk_samples  # noqa: E402

START = "Earlier notes: the special magic number is 4810."


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_policy_folder(tmp_path_factory.mktemp("tiny") / "model")


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_sample_with_notes_starts_its_rollouts_from_them(tiny_model: Path, tmp_path: Path):
    """The first update of every rollout reads the sample's notes, not empty ones; a sample
    without notes starts empty, as memagent always does."""
    rows = two_chunk_samples(2)
    # the record the state recipes write (recipes/smollm2/state_reset.py, empty_arrivals.py)
    document = [rows[0]["context"]]
    rows[0] = reset_state_record(Sample(**rows[0]), "q0", "arrival", START, document)
    raw = tiny_config(tiny_model, write(tmp_path / "train.jsonl", rows), steps=1)
    raw["optim"]["minibatches"] = 1
    raw["reward"]["keep_degenerate"] = True  # every rollout's rows, whatever it scored
    trainer = make_trainer(TrainConfig.from_dict(raw), tmp_path / "run")
    trainer.out.mkdir()
    record = trainer.step(Position())
    tokenizer = trainer.policy.tokenizer
    first = [r for r in trainer.last_rows if r.step == 0]
    shown = {r.group: START in tokenizer.decode(r.prompt_ids) for r in first}
    assert shown == {"q0": True, "q1": False}
    assert record["rows"] == len(trainer.last_rows) == 2 * 2 * 3


def test_a_sample_can_ask_for_the_section_first_order(tiny_model: Path, tmp_path: Path):
    """States reached in the section-first order are rolled out in that order, beside samples
    in the config's own (paper) order, in one step."""
    rows = two_chunk_samples(2)
    rows[0]["meta"] = {"section_first": True, "memory": START}  # a state reached that way
    raw = tiny_config(tiny_model, write(tmp_path / "train.jsonl", rows), steps=1)
    raw["optim"]["minibatches"] = 1
    raw["reward"]["keep_degenerate"] = True
    trainer = make_trainer(TrainConfig.from_dict(raw), tmp_path / "run")
    trainer.out.mkdir()
    trainer.step(Position())
    tokenizer = trainer.policy.tokenizer
    updates = [r for r in trainer.last_rows if r.step < 2]
    assert updates
    for row in updates:
        prompt = tokenizer.decode(row.prompt_ids)
        section_comes_first = prompt.index("Section:") < prompt.index("Problem:")
        assert section_comes_first == (row.group == "q0")
        if row.step == 0:
            assert (START in prompt) == (row.group == "q0")


def test_refill_replaces_a_degenerate_group_with_a_new_question(
    tiny_model: Path, tmp_path: Path
) -> None:
    """DAPO's dynamic sampling: the all-equal group of q0 is dropped and another question's
    group trains in its place; without refill the step trains on one group only."""
    data = write(tmp_path / "train.jsonl", two_chunk_samples(4))
    counts = {}
    for refill in (0, 2):
        raw = tiny_config(tiny_model, data, steps=1)
        raw["reward"]["reward"] = "tests.tiny_policy:flat_for_the_first_question"
        raw["rollout"].update(questions=2, refill=refill)
        raw["optim"]["minibatches"] = 1
        raw["run"]["seed"] = 1  # q0 is the step's first question
        trainer = make_trainer(TrainConfig.from_dict(raw), tmp_path / f"run{refill}")
        trainer.out.mkdir()
        record = trainer.step(Position())
        assert "q0" in record["samples"][:2]
        assert "q0" not in {r.group for r in trainer.last_rows}
        counts[refill] = (record["dropped_groups"], record["refilled_groups"], record["rows"])
        trained = {r.group for r in trainer.last_rows}
        assert len(trained) == (1 if refill == 0 else 2)
    assert counts == {0: (1, 0, 6), 2: (1, 1, 12)}


def test_refill_is_a_count() -> None:
    with pytest.raises(UsageError, match=r"rollout\.refill"):
        TrainConfig.from_dict({"data": {"train": ["x.jsonl"]}, "rollout": {"refill": -1}})


def test_refill_and_keep_degenerate_are_refused_together() -> None:
    raw = {"data": {"train": ["x.jsonl"]}, "rollout": {"refill": 1}}
    raw["reward"] = {"keep_degenerate": True}
    with pytest.raises(UsageError, match="keep_degenerate"):
        TrainConfig.from_dict(raw)


def test_a_steps_record_gives_the_reward_spread_grpo_learns_from() -> None:
    """The diagnosis of an RL stage needs the within-group spread: a group whose rollouts all
    score alike adds 0 however high its mean, and one split 0/1 adds 0.5."""
    from longread.train.credit import GroupCredit
    from longread.train.rollouts import reward_record

    def group(rewards: list[float]) -> GroupCredit:
        return GroupCredit(rewards, rewards, [[0.0]] * len(rewards), len(set(rewards)) == 1)

    record = reward_record([group([1, 1, 1, 1]), group([0, 1, 0, 1])])
    assert record["reward_group_std"] == pytest.approx(0.25)
    assert record["reward"] == pytest.approx(0.75)
    assert record["group_accuracy"] == [1.0, 0.5]
