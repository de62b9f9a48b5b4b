"""Export a committed stage's peft adapter (``recipes/smollm2/stages/<stage>``) for llama.cpp.

    .venv/bin/python recipes/smollm2/export_stage.py sft1e

Writes ``recipes/smollm2/runs/<stage>/adapter.gguf``, and beside it ``adapter.json`` with the
agent settings of the stage's config (``<stage>.toml``): what the stage's training run published,
rebuilt from the adapter the repo keeps, so a fresh clone can evaluate or ship that stage
without rerunning it (``runs/`` is not committed). Refuses to overwrite a run's own adapter.

    .venv/bin/python recipes/smollm2/export_stage.py grpo-run --checkpoint 12

exports a committed training checkpoint instead (``stages/grpo-run/checkpoints/step-000012``:
the LoRA weights of that step; ``grpo.toml`` names the run's model and settings) to
``recipes/smollm2/runs/grpo-run-step12/adapter.gguf``, so a step the trainer evaluated in-process
can be evaluated through ``longread eval run`` like every other stage.

    .venv/bin/python recipes/smollm2/export_stage.py grpo26b-run --checkpoint 6 --peft grpo26b

writes that step's LoRA as a peft adapter folder instead (``stages/grpo26b``, to commit), for
a later stage to start from (``model.adapter``): a supervised stage on top of an RL one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from longread.train.checkpoint import STEP_PREFIX, load_plain
from longread.train.config import ModelSection, TrainConfig, load_config
from longread.train.export import export_lora_gguf, save_peft_adapter, trained_settings
from longread.train.policy import Policy
from longread.train.session import load_policy

RECIPE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", help="a folder name under recipes/smollm2/stages/")
    parser.add_argument("--checkpoint", type=int, help="export this step of the stage's run")
    parser.add_argument(
        "--peft", metavar="NAME", help="with --checkpoint: write stages/NAME, a peft folder"
    )
    args = parser.parse_args()
    if args.peft and args.checkpoint is None:
        sys.exit("export_stage.py: --peft exports a checkpoint: give --checkpoint")
    if args.checkpoint is None:
        export_stage(args.stage)
    elif args.peft:
        export_checkpoint_peft(args.stage, args.checkpoint, args.peft)
    else:
        export_checkpoint(args.stage, args.checkpoint)


def export_stage(stage: str) -> None:
    source = RECIPE / "stages" / stage
    if not (source / "adapter_config.json").is_file():
        sys.exit(f"export_stage.py: {source} holds no peft adapter")
    target = _target(stage)
    agent = load_config(RECIPE / f"{stage}.toml").agent  # what the stage trained with
    policy = load_policy(ModelSection(adapter=str(source)), seed=0)
    export_lora_gguf(policy.model, target, trained_with=trained_settings(agent))
    print(f"exported {source} to {target}")


def export_checkpoint(stage: str, step: int) -> None:
    target = _target(f"{stage}-step{step}")
    config, policy, weights_file = checkpoint_policy(stage, step)
    export_lora_gguf(policy.model, target, trained_with=trained_settings(config.agent))
    print(f"exported {weights_file} to {target}")


def export_checkpoint_peft(stage: str, step: int, name: str) -> None:
    target = RECIPE / "stages" / name
    if target.exists():
        sys.exit(f"export_stage.py: {target} exists already")
    config, policy, weights_file = checkpoint_policy(stage, step)
    save_peft_adapter(policy.model, target, config.model.path)
    print(f"exported {weights_file} to {target} (peft)")


def checkpoint_policy(stage: str, step: int) -> tuple[TrainConfig, Policy, Path]:
    """The run's recipe, its policy with step ``step``'s LoRA weights, and their file."""
    run = RECIPE / "stages" / stage
    weights_file = run / "checkpoints" / f"{STEP_PREFIX}{step:06d}" / "weights.pt"
    if not weights_file.is_file():
        sys.exit(f"export_stage.py: {weights_file} does not exist")
    config = load_config(RECIPE / f"{stage.removesuffix('-run')}.toml")  # the run's recipe
    policy = load_policy(config.model, seed=0)
    params = dict(policy.model.named_parameters())
    with torch.no_grad():
        for name, tensor in load_plain(weights_file).items():
            params[name].copy_(tensor)
    return config, policy, weights_file


def _target(name: str) -> Path:
    target = RECIPE / "runs" / name / "adapter.gguf"
    if target.exists():
        sys.exit(f"export_stage.py: {target} exists already (the stage's own export)")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


if __name__ == "__main__":
    main()
