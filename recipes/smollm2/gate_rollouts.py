"""What a gate-RL run's rollouts did, step by step and by task (issue 29, stage grpo29r).

    .venv/bin/python recipes/smollm2/gate_rollouts.py recipes/smollm2/runs/grpo29r

Reads ``rollouts/step-*.jsonl.gz`` (one line per rollout: its reward, whether it was right,
and its run) and prints, per step and task (HotpotQA, chains, needles): rollouts, right,
stopped early (``chunks_read`` below ``chunks``), penalised (reward below the right/wrong
score: the rollout stopped before an evidence sentence was shown, GRU-Mem's penalty) and
share of the document read. The penalty is read off the reward because the skip bonus only
ever adds to it: a reward below ``correct`` can only be the early-exit penalty.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict
from pathlib import Path

COLUMNS = ("rollouts", "right", "stopped early", "penalised", "read")


def task_of(sample_id: str) -> str:
    """The task a training sample came from, by its id's prefix."""
    for prefix in ("chains", "niah"):
        if sample_id.startswith(prefix):
            return prefix
    return "hotpotqa"


def step_rows(path: Path) -> dict[str, dict[str, float]]:
    """The columns of one step's rollouts, by task."""
    rows: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(COLUMNS, 0.0))
    with gzip.open(path, "rt") as lines:
        for line in lines:
            rollout = json.loads(line)
            run = rollout["run"]
            row = rows[task_of(rollout["sample_id"])]
            row["rollouts"] += 1
            row["right"] += rollout["correct"]
            read, chunks = run.get("chunks_read"), run.get("chunks")
            row["stopped early"] += bool(read is not None and chunks and read < chunks)
            row["penalised"] += rollout["reward"] < rollout["correct"] - 1e-9
            row["read"] += (read / chunks) if read is not None and chunks else 1.0
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a training run folder with rollouts/")
    args = parser.parse_args()
    steps = sorted((args.run / "rollouts").glob("step-*.jsonl.gz"))
    if not steps:
        raise SystemExit(f"gate_rollouts: no rollouts/step-*.jsonl.gz in {args.run}")
    print("| step | task | " + " | ".join(COLUMNS) + " |")
    print("|---:|---|" + "---:|" * len(COLUMNS))
    for path in steps:
        step = int(path.name.split("-")[1].split(".")[0])
        for task, row in sorted(step_rows(path).items()):
            n = int(row["rollouts"])
            cells = [str(n), *(str(int(row[c])) for c in COLUMNS[1:4])]
            cells.append(f"{row['read'] / n:.0%}")
            print(f"| {step} | {task} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
