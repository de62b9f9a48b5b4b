"""The share of update seconds spent decoding, from a run's traces (issue 29's update gate).

    .venv/bin/python recipes/smollm2/decode_share.py RUN_DIR [RUN_DIR ...]

Fits each update step's seconds as a * prompt tokens + b * completion tokens + c (least
squares) and prints b * completion tokens over all update seconds: what a gate that skips
writing the memory out could save at most.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def decode_share(run: Path) -> tuple[int, float]:
    """The number of update steps in ``run``'s traces and their fitted decode share."""
    rows, seconds = [], []
    for trace in sorted((run / "traces").glob("*.json")):
        for step in json.loads(trace.read_text())["steps"]:
            if step["kind"] == "update" and step.get("prompt_tokens"):
                rows.append([step["prompt_tokens"], step.get("completion_tokens") or 0, 1.0])
                seconds.append(step["seconds"])
    x, y = np.array(rows, float), np.array(seconds)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return len(y), float((x[:, 1] * coef[1]).sum() / y.sum())


if __name__ == "__main__":
    for folder in sys.argv[1:]:
        count, share = decode_share(Path(folder))
        print(f"{folder}: {count} updates, decoding {share:.0%} of update seconds")
