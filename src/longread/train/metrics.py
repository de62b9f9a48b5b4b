"""Training metrics: one JSON line per step (and per evaluation), and a plot of them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

# What the plot shows, one panel each, in this order.
PANELS = (
    ("reward", "reward (mean)"),
    ("accuracy", "accuracy (strict)"),
    ("memory_tokens", "memory tokens / update"),
    ("format_error_rate", "format-error rate"),
    ("kl", "KL to reference"),
    ("clip_fraction", "clip fraction"),
    ("dropped_groups", "dropped groups"),
    ("seconds", "seconds per phase"),
)
PHASES = ("seconds_rollout", "seconds_old_logprobs", "seconds_update")


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Append one record, flushed to disk before returning."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def keep_until(path: Path, step: int) -> None:
    """Drop records of steps after ``step``: a resumed run redoes them and writes them again."""
    lines = read_lines(path)
    kept = [r for r in lines if r.get("step", 0) <= step]
    if len(kept) != len(lines):
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in kept))
        tmp.replace(path)


def plot(metrics: Path, evals: Path, out: Path) -> Path | None:
    """Draw every panel of ``PANELS`` against the step into ``out`` (PNG). Needs matplotlib;
    returns None (and draws nothing) when it is missing or there is nothing to draw."""
    rows = read_lines(metrics)
    if not rows:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    evaluated = read_lines(evals)
    fig, axes = plt.subplots(2, 4, figsize=(16, 7), constrained_layout=True)
    steps = [r["step"] for r in rows]
    for ax, (key, title) in zip(axes.flat, PANELS, strict=True):
        ax.set_title(title)
        ax.set_xlabel("step")
        if key == "seconds":
            for phase in PHASES:
                ax.plot(steps, [r.get(phase) for r in rows], marker=".", label=phase[8:])
            ax.legend(fontsize="small")
            continue
        values = [r.get(key) for r in rows]
        ax.plot(steps, [v if v is not None else float("nan") for v in values], marker=".")
        if key == "accuracy" and evaluated:
            ax.plot(
                [e["step"] for e in evaluated],
                [e["accuracy"] for e in evaluated],
                marker="s",
                label="held-out",
            )
            ax.legend(fontsize="small")
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out
