"""The CPU trainer end to end on a tiny random Llama: GRPO steps over real memagent rollouts,
the loss against a float64 formula written here, and resume after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import tomllib

torch = pytest.importorskip("torch")  # the 'train' extra; `make install` always installs it

from longread.train.checkpoint import Position, latest_checkpoint  # noqa: E402
from longread.train.config import TrainConfig, describe_defaults  # noqa: E402
from longread.train.run_folder import read_rollouts  # noqa: E402
from longread.train.session import load_policy, policy_tokenizer  # noqa: E402
from longread.train.trainer import METRICS_FILE, Trainer  # noqa: E402

from .tiny_policy import build_tiny_policy_folder, two_chunk_samples  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TIMING_KEYS = {"seconds_rollout", "seconds_old_logprobs", "seconds_update", "seconds_checkpoint"}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_policy_folder(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in two_chunk_samples(4)))
    return path


def tiny_config(model: Path, data: Path, steps: int = 2) -> dict:
    return {
        "model": {"path": str(model), "lora_rank": 4, "lora_alpha": 8.0},
        "agent": {"chunk_tokens": 250, "memory_tokens": 6, "final_tokens": 6},
        "data": {"train": [str(data)]},
        "rollout": {"questions": 2, "rollouts": 2},
        "reward": {"reward": "tests.tiny_policy:reply_length"},
        "optim": {"lr": 0.05, "micro_batch": 3},
        "run": {"steps": steps, "seed": 7},
    }


def make_trainer(config: TrainConfig, out: Path) -> Trainer:
    from longread.train.session import load_data

    policy = load_policy(config.model, config.run.seed)
    samples = load_data(config.data.train, "training")
    return Trainer(config, policy, policy_tokenizer(policy), samples, out, progress=False)


def trainable(trainer: Trainer) -> dict[str, torch.Tensor]:
    model = trainer.policy.model
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def reference_loss(trainer: Trainer, clip: float = 0.2) -> float:
    """The clipped surrogate of the last step's rows in float64, from an unpadded forward of
    each conversation: -(1/N) sum over completion tokens of min(r A, clip(r) A)."""
    model = trainer.policy.model
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for row, old in zip(trainer.last_rows, trainer.last_old_logprobs, strict=True):
            ids = torch.tensor([row.prompt_ids + row.completion_ids])
            logits = model(input_ids=ids).logits[0].double()
            start = len(row.prompt_ids) - 1
            for t, token in enumerate(row.completion_ids):
                logp = torch.log_softmax(logits[start + t], dim=-1)[token].item()
                ratio = torch.exp(torch.tensor(logp - old[t], dtype=torch.float64)).item()
                clipped = min(max(ratio, 1 - clip), 1 + clip)
                total += min(ratio * row.advantage, clipped * row.advantage)
                tokens += 1
    return -total / tokens


@pytest.mark.parametrize("old_logprobs", ["auto", "recompute"])
def test_two_grpo_steps_train_the_adapter_with_the_reference_loss(
    tiny_model: Path, data_file: Path, tmp_path: Path, old_logprobs: str
) -> None:
    raw = tiny_config(tiny_model, data_file)
    # One optimizer step per training step: the formula below is the loss on the weights the
    # step starts from (a second minibatch's loss is on the weights after the first).
    raw["optim"].update(old_logprobs=old_logprobs, minibatches=1)
    config = TrainConfig.from_dict(raw)
    trainer = make_trainer(config, tmp_path / "run")
    trainer.out.mkdir()
    position = Position()
    for number in (1, 2):
        before = trainable(trainer)
        record = trainer.step(position)
        after = trainable(trainer)
        # Every rollout is 2 update conversations + 1 final, each its own training row.
        assert len(trainer.last_rows) == 2 * 2 * 3
        assert {r.step for r in trainer.last_rows} == {0, 1, 2}
        assert record["dropped_groups"] == 0 and record["rows"] == 12
        assert any(r.advantage != 0 for r in trainer.last_rows)
        # The step's rollouts are kept for reading, with the advantages the update used.
        saved = read_rollouts(trainer.out, number)
        assert [(line["group"], line["k"]) for line in saved] == [(0, 0), (0, 1), (1, 0), (1, 1)]
        used = {(r.rollout, r.step): r.advantage for r in trainer.last_rows}
        assert {
            (step["run_id"], i): line["advantages"][i]
            for line in saved
            for i, step in enumerate(line["run"]["steps"])
        } == used
        assert not any("tokens" in step for line in saved for step in line["run"]["steps"])
        changed = [n for n in after if not torch.equal(before[n], after[n])]
        assert any("lora_B" in n for n in changed), f"step {number} changed nothing"
        # The loss the trainer optimised equals the formula on the pre-update weights.
        with torch.no_grad():
            for name, p in trainer.policy.model.named_parameters():
                if name in before:
                    p.copy_(before[name])
        assert record["loss"] == pytest.approx(reference_loss(trainer), rel=1e-4, abs=1e-6)
        with torch.no_grad():
            for name, p in trainer.policy.model.named_parameters():
                if name in after:
                    p.copy_(after[name])
    assert position.step == 2
    lines = [json.loads(x) for x in (trainer.out / METRICS_FILE).read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2]
    # The policy sampled its own rollouts: its logprobs and the trainer's agree.
    assert all(x["sampler_logprob_gap"] < 1e-4 for x in lines)
    # The adapter is published for llama.cpp and for peft after every step.
    assert (trainer.out / "adapter.gguf").is_file()
    assert (trainer.out / "adapter" / "adapter_config.json").is_file()


def test_resumed_run_matches_an_uninterrupted_one(
    tiny_model: Path, data_file: Path, tmp_path: Path
) -> None:
    config = TrainConfig.from_dict(tiny_config(tiny_model, data_file, steps=3))
    whole = make_trainer(config, tmp_path / "whole")
    whole.run()
    first = make_trainer(config, tmp_path / "parts")
    assert first.run(stop_after=1).step == 1
    second = make_trainer(config, tmp_path / "parts")  # a new process would load afresh
    assert second.run().step == 3
    expected, got = trainable(whole), trainable(second)
    assert all(torch.equal(expected[n], got[n]) for n in expected)
    assert _metrics(tmp_path / "whole") == _metrics(tmp_path / "parts")


def _metrics(folder: Path) -> list[dict]:
    lines = [json.loads(x) for x in (folder / METRICS_FILE).read_text().splitlines()]
    return [{k: v for k, v in line.items() if k not in TIMING_KEYS} for line in lines]


def _train(config: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "longread", "train", "--config", str(config), "--out", str(out),
         "--no-progress"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def _weights(out: Path) -> dict[str, torch.Tensor]:
    latest = latest_checkpoint(out / "checkpoints")
    assert latest is not None
    return torch.load(latest / "weights.pt", weights_only=True)


def test_kill_9_then_the_same_command_continues_exactly(
    tiny_model: Path, data_file: Path, tmp_path: Path
) -> None:
    config = tmp_path / "tiny.toml"
    raw = tiny_config(tiny_model, data_file, steps=4)
    config.write_text(_toml(raw))
    whole = _train(config, tmp_path / "whole")
    assert whole.wait(timeout=600) == 0, whole.stderr.read() if whole.stderr else ""

    killed = _train(config, tmp_path / "killed")
    checkpoints = tmp_path / "killed" / "checkpoints"
    while latest_checkpoint(checkpoints) is None and killed.poll() is None:
        time.sleep(0.01)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=60)
    stopped_at = int(latest_checkpoint(checkpoints).name.split("-")[1])  # type: ignore[union-attr]
    assert stopped_at < 4, "the kill came after the run had finished"

    resumed = _train(config, tmp_path / "killed")
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err
    assert "finished at step 4 of 4" in err
    expected, got = _weights(tmp_path / "whole"), _weights(tmp_path / "killed")
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[n], got[n]) for n in expected)
    assert _metrics(tmp_path / "whole") == _metrics(tmp_path / "killed")


def _toml(raw: dict) -> str:
    lines = []
    for section, values in raw.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def test_print_config_lists_every_default() -> None:
    printed = tomllib.loads(describe_defaults())
    assert printed == asdict(TrainConfig())


def test_full_fine_tuning_with_a_kl_to_the_frozen_reference(
    tiny_model: Path, data_file: Path, tmp_path: Path
) -> None:
    raw = tiny_config(tiny_model, data_file, steps=1)
    raw["model"]["lora"] = False
    raw["optim"].update(kl_coef=0.1, lr=0.01, minibatches=1)  # the KL before any update
    config = TrainConfig.from_dict(raw)
    from longread.train.session import load_data

    policy = load_policy(config.model, config.run.seed)
    reference = load_policy(config.model, config.run.seed).model.eval()
    samples = load_data(config.data.train, "training")
    trainer = Trainer(
        config, policy, policy_tokenizer(policy), samples, tmp_path / "run",
        progress=False, reference=reference,
    )  # fmt: skip
    before = trainable(trainer)
    assert len(before) == len(list(policy.model.parameters()))  # every weight trains
    trainer.run()
    after = trainable(trainer)
    assert sum(not torch.equal(before[n], after[n]) for n in before) > len(before) // 2
    (line,) = [json.loads(x) for x in (trainer.out / METRICS_FILE).read_text().splitlines()]
    # The policy equals the reference before the update, so the step's KL is 0 (k3 >= 0).
    assert line["kl"] == pytest.approx(0.0, abs=1e-6)
    assert not (trainer.out / "adapter.gguf").exists()  # no LoRA to publish


def test_lora_kl_reference_is_the_base_with_the_adapter_off(
    tiny_model: Path, data_file: Path, tmp_path: Path
) -> None:
    raw = tiny_config(tiny_model, data_file, steps=2)
    raw["optim"].update(kl_coef=0.5, minibatches=1)  # step 1's KL: before any update
    trainer = make_trainer(TrainConfig.from_dict(raw), tmp_path / "run")
    trainer.run()
    kls = [json.loads(x)["kl"] for x in (trainer.out / METRICS_FILE).read_text().splitlines()]
    # LoRA starts as the identity (B = 0): no divergence at step 1, some after one update.
    assert kls[0] == pytest.approx(0.0, abs=1e-6)
    assert kls[1] > 0.0


def test_a_grpo_step_under_the_defaults_trains_off_policy_so_the_clip_can_act(
    tiny_model: Path, data_file: Path, tmp_path: Path
) -> None:
    """With one optimizer step per training step the PPO ratio is exactly 1 and the clip
    never acts (clip_fraction 0.0 at all 12 steps of recipes/smollm2/stages/grpo-run). The
    default is two minibatches: the second trains on rows the first step's weights did not
    sample."""
    raw = tiny_config(tiny_model, data_file, steps=1)
    raw["optim"].update(clip_low=0.05, clip_high=0.05)  # a clip one tiny-model step exceeds
    lines = {}
    for minibatches in (None, 1):  # the default, then one optimizer step
        if minibatches is not None:
            raw["optim"]["minibatches"] = minibatches
        config = TrainConfig.from_dict(raw)
        trainer = make_trainer(config, tmp_path / f"run-{minibatches}")
        trainer.run()
        (line,) = [json.loads(x) for x in (trainer.out / METRICS_FILE).read_text().splitlines()]
        lines[minibatches] = line
        # The old logprobs are the sampling policy's for every row, a later minibatch's too
        # (the policy sampled its own rollouts, so they agree with its sampler's).
        assert line["sampler_logprob_gap"] < 1e-4
        assert len(trainer.last_old_logprobs) == line["rows"] == 12
    assert TrainConfig.from_dict(tiny_config(tiny_model, data_file)).optim.minibatches == 2
    default, single = lines[None], lines[1]
    assert default["max_ratio_deviation"] > 0.05  # the ratio left 1 past the clip ...
    assert default["clip_fraction"] > 0.0  # ... and the clip acted on some tokens
    assert single["max_ratio_deviation"] == pytest.approx(0.0, abs=1e-6)  # on-policy
    assert single["clip_fraction"] == 0.0


def test_one_optimizer_step_per_training_step_is_warned_about(tiny_model: Path, data_file: Path):
    raw = tiny_config(tiny_model, data_file)
    raw["optim"]["minibatches"] = 1
    (warning,) = TrainConfig.from_dict(raw).warnings()
    assert "clip_low/clip_high (0.2/0.2) can never act" in warning
    raw["optim"]["epochs"] = 2  # a second epoch is off-policy too
    assert TrainConfig.from_dict(raw).warnings() == []
