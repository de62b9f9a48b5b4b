"""Export a committed stage's peft adapter (``recipes/smollm2/stages/<stage>``) for llama.cpp.

    .venv/bin/python recipes/smollm2/export_stage.py sft1e

Writes ``recipes/smollm2/runs/<stage>/adapter.gguf``, and beside it ``adapter.json`` with the
agent settings of the stage's config (``<stage>.toml``): what the stage's training run published,
rebuilt from the adapter the repo keeps, so a fresh clone can evaluate or ship that stage
without rerunning it (``runs/`` is not committed). Refuses to overwrite a run's own adapter.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from longread.train.config import ModelSection, load_config
from longread.train.export import export_lora_gguf, trained_settings
from longread.train.session import load_policy

RECIPE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", help="a folder name under recipes/smollm2/stages/")
    stage = parser.parse_args().stage
    source = RECIPE / "stages" / stage
    if not (source / "adapter_config.json").is_file():
        sys.exit(f"export_stage.py: {source} holds no peft adapter")
    target = RECIPE / "runs" / stage / "adapter.gguf"
    if target.exists():
        sys.exit(f"export_stage.py: {target} exists already (the stage's own export)")
    agent = load_config(RECIPE / f"{stage}.toml").agent  # what the stage trained with
    policy = load_policy(ModelSection(adapter=str(source)), seed=0)
    target.parent.mkdir(parents=True, exist_ok=True)
    export_lora_gguf(policy.model, target, trained_with=trained_settings(agent))
    print(f"exported {source} to {target}")


if __name__ == "__main__":
    main()
