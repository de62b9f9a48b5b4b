"""Carry an unfinished training stage from one session (or clone) to the next through git.

    .venv/bin/python recipes/smollm2/snapshot.py save grpo      # after a session's last step
    .venv/bin/python recipes/smollm2/snapshot.py restore grpo   # train.sh does this itself

``runs/`` is not committed: a stage that must stop before it is done (the GRPO stage takes
hours on 2 cores) is saved as ``stages/<stage>-run/``: its newest checkpoint (LoRA weights,
optimizer, scheduler, RNG, data position), its config, metrics and held-out curve. ``restore``
copies it back as ``runs/<stage>`` when that folder does not exist, and ``longread train``
resumes at the next step. The config names its data and starting adapter relative to the run
folder (each copy's relative to the folder it lies in), and the trainer compares the data by
content, so a snapshot taken in one clone resumes in any other, wherever it lies.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from longread.train.checkpoint import latest_checkpoint
from longread.train.runconfig import absolute_paths, relative_paths

RECIPE = Path(__file__).resolve().parent
FILES = ("config.json", "metrics.jsonl", "eval.jsonl", "metrics.png")
ORIGIN = "snapshot.json"  # what the snapshot holds: the stage and its step


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
    _move_config(run, target)
    shutil.copytree(checkpoint, target / "checkpoints" / checkpoint.name)
    step = json.loads((checkpoint / "position.json").read_text())["step"]
    origin = {"stage": stage, "step": step}
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
    _move_config(source, run)
    print(f"restored {stage} at step {origin['step']} into {run}")


def _move_config(source: Path, target: Path) -> None:
    """``target``'s copy of ``source/config.json`` with its paths made relative to ``target``
    (the trainer saves them relative to the run folder; ``stages/grpo-run`` and ``runs/grpo``
    see ``stages/sft1e`` as ``../sft1e`` and ``../../stages/sft1e``). A path, not text,
    operation: the clone's location is never written down."""
    config = json.loads((source / "config.json").read_text())
    moved = relative_paths(absolute_paths(config, source), target)
    (target / "config.json").write_text(json.dumps(moved, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("save", "restore"))
    parser.add_argument("stage", help="a stage of recipes/smollm2/train.sh, e.g. grpo")
    args = parser.parse_args()
    save(args.stage) if args.action == "save" else restore(args.stage)


if __name__ == "__main__":
    main()
