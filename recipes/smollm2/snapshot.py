"""Carry an unfinished training stage from one session (or clone) to the next through git.

    .venv/bin/python recipes/smollm2/snapshot.py save grpo      # after a session's last step
    .venv/bin/python recipes/smollm2/snapshot.py restore grpo   # train.sh does this itself

``runs/`` is not committed: a stage that must stop before it is done (the GRPO stage takes
hours on 2 cores) is saved as ``stages/<stage>-run/``: its newest checkpoint (LoRA weights,
optimizer, scheduler, RNG, data position), its config, metrics and held-out curve. ``restore``
puts it back as ``runs/<stage>`` when that folder does not exist, with the config's absolute
paths moved to this clone, so ``longread train`` resumes at the next step.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from longread.train.checkpoint import latest_checkpoint

RECIPE = Path(__file__).resolve().parent
ROOT = RECIPE.parents[1]
FILES = ("config.json", "metrics.jsonl", "eval.jsonl", "metrics.png")
ORIGIN = "snapshot.json"  # where the snapshot was taken: the clone's root, the step


def save(stage: str) -> None:
    run, target = RECIPE / "runs" / stage, RECIPE / "stages" / f"{stage}-run"
    checkpoint = latest_checkpoint(run / "checkpoints")
    if checkpoint is None:
        sys.exit(f"snapshot.py: {run} has no checkpoint to save")
    shutil.rmtree(target, ignore_errors=True)
    (target / "checkpoints").mkdir(parents=True)
    for name in FILES:
        if (run / name).is_file():
            shutil.copyfile(run / name, target / name)
    shutil.copytree(checkpoint, target / "checkpoints" / checkpoint.name)
    step = json.loads((checkpoint / "position.json").read_text())["step"]
    origin = {"root": str(ROOT), "stage": stage, "step": step}
    (target / ORIGIN).write_text(json.dumps(origin, indent=2) + "\n")
    print(f"saved {stage} at step {step} to {target}")


def restore(stage: str) -> None:
    run, source = RECIPE / "runs" / stage, RECIPE / "stages" / f"{stage}-run"
    if run.exists():
        print(f"{run} exists: nothing to restore")
        return
    if not (source / ORIGIN).is_file():
        print(f"no snapshot of {stage} in {source}: the stage starts afresh")
        return
    origin = json.loads((source / ORIGIN).read_text())
    shutil.copytree(source, run, ignore=shutil.ignore_patterns(ORIGIN))
    config = run / "config.json"
    config.write_text(config.read_text().replace(origin["root"], str(ROOT)))
    print(f"restored {stage} at step {origin['step']} into {run}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("save", "restore"))
    parser.add_argument("stage", help="a stage of recipes/smollm2/train.sh, e.g. grpo")
    args = parser.parse_args()
    save(args.stage) if args.action == "save" else restore(args.stage)


if __name__ == "__main__":
    main()
