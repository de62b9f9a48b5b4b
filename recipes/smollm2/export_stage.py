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
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from longread.train.checkpoint import STEP_PREFIX, load_plain
from longread.train.config import ModelSection, load_config
from longread.train.export import export_lora_gguf, trained_settings
from longread.train.session import load_policy

RECIPE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", help="a folder name under recipes/smollm2/stages/")
    parser.add_argument("--checkpoint", type=int, help="export this step of the stage's run")
    args = parser.parse_args()
    if args.checkpoint is None:
        export_stage(args.stage)
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
    run = RECIPE / "stages" / stage
    weights_file = run / "checkpoints" / f"{STEP_PREFIX}{step:06d}" / "weights.pt"
    if not weights_file.is_file():
        sys.exit(f"export_stage.py: {weights_file} does not exist")
    config = load_config(RECIPE / f"{stage.removesuffix('-run')}.toml")  # the run's recipe
    target = _target(f"{stage}-step{step}")
    policy = load_policy(config.model, seed=0)
    params = dict(policy.model.named_parameters())
    with torch.no_grad():
        for name, tensor in load_plain(weights_file).items():
            params[name].copy_(tensor)
    export_lora_gguf(policy.model, target, trained_with=trained_settings(config.agent))
    print(f"exported {weights_file} to {target}")


def _target(name: str) -> Path:
    target = RECIPE / "runs" / name / "adapter.gguf"
    if target.exists():
        sys.exit(f"export_stage.py: {target} exists already (the stage's own export)")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


if __name__ == "__main__":
    main()
