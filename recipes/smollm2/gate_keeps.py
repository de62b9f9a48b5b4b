"""Where an update gate's `<keep/>` replies fell, over eval runs (issue 29's update gate).

    .venv/bin/python recipes/smollm2/gate_keeps.py DATA RUN [RUN ...]

For every traced sample of each `eval run` folder over the samples of DATA (the run's `--data`
file), the first-read updates (not focused rereads) split by whether their section holds a gold
evidence sentence of the sample (`data/evidence.py`): how many replied `<keep/>` (the gate kept
the memory unwritten) in each part. A gate that works keeps most sections without evidence and
never one with it; a `<keep/>` at the needle's section loses the needle. Also the samples
right, and the tokens decoded a sample (what the gate is for: a `<keep/>` is a few tokens
where the papers' update writes the notes out again).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from evidence_taken import PREFIX, evidence_and_runs, right_by_sample  # this folder's
from reread_would_act import section_of  # this folder's

from longread.trace import FOCUSED_REREAD, GATE_KEEP, Run


def count(run_dir: Path, evidence: dict[str, list[str]]) -> Counter[str]:
    """The run's counts (see the module docstring) over its finished, traced samples."""
    right = right_by_sample(run_dir)
    out: Counter[str] = Counter()
    for trace in sorted((run_dir / "traces").glob("*.json")):
        run = Run.load(trace)
        if run.sample_id not in right:
            continue
        out["samples"] += 1
        out["right"] += right[run.sample_id]
        for step in run.steps:
            out["decoded"] += step.completion_tokens or 0
            if step.kind != "update" or FOCUSED_REREAD in step.flags:
                continue
            section = section_of(step.messages[-1]["content"])
            part = (
                "evidence"
                if any(s[:PREFIX] in section for s in evidence.get(run.sample_id or "", []))
                else "empty"
            )
            out[part] += 1
            out[f"{part}_kept"] += GATE_KEEP in step.flags
    return out


def main() -> None:
    evidence, runs = evidence_and_runs(__doc__.splitlines()[0])
    print(
        "| run | right | `<keep/>` at sections without evidence | `<keep/>` at evidence "
        "sections | decoded tokens a sample |"
    )
    print("|---|---:|---:|---:|---:|")
    for run_dir in runs:
        if not (run_dir / "traces").is_dir():
            sys.exit(f"gate_keeps.py: {run_dir} has no traces/ (not an eval run folder)")
        c = count(run_dir, evidence)
        n = c["samples"] or 1
        print(
            f"| {run_dir.name} | {c['right']}/{c['samples']} | {c['empty_kept']} of "
            f"{c['empty']} | {c['evidence_kept']} of {c['evidence']} | {c['decoded'] / n:.0f} |"
        )


if __name__ == "__main__":
    main()
