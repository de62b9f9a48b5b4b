"""What ReMemR1's and MemReread's runs did with their formats, over eval runs (issue 28).

    .venv/bin/python recipes/smollm2/agent_formats.py DATA RUN [RUN ...]

For every traced sample of each `eval run` folder over the samples of DATA (the run's `--data`
file), as the issue's targets ask:

- **well formed**: of the calls whose reply has a format to follow (ReMemR1's updates, with
  `<update>` and an optional `<recall>`; MemReread's decisions, `<stop/>` or a sub-question),
  those the agent did not flag `format_error`; in brackets, those a format stop cut
  (`format_stopped`: the reply went on with another `<update>` and was ended there);
- **rememr1**: the calls that asked a recall, and those whose recalled memory held a gold
  evidence sentence (most of its words, as `evidence_taken.py` counts): a recall that brought
  back the needed fact, e.g. a reversed chain's code;
- **memreread**: the samples whose decision asked a sub-question, and the rereads whose notes
  took in an evidence sentence;
- **first hops** (memreread on chains): the decisions that asked a sub-question with no
  "code" in it (where the item went, not a place's code), and the rereads whose boxed answer
  is a name the bridge sentence holds (the place found);
- **root notes**: the samples whose first pass ended with notes holding an evidence sentence
  (a reversed chain's bridge or its fact): what a decision needs to ask a useful sub-question;
- **right**: the run's headline metric, as `longread eval compare` counts it.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from evidence_taken import evidence_and_runs, holds_evidence, right_by_sample  # this folder's

from longread.trace import FORMAT_ERROR, FORMAT_STOPPED, Run

# The calls whose reply follows an agent's own format.
FORMATTED = {"rememr1": "update", "memreread": "decide"}


def count(run_dir: Path, evidence: dict[str, list[str]]) -> Counter[str]:
    """The run's counts (see the module docstring) over its finished, traced samples."""
    right = right_by_sample(run_dir)
    out: Counter[str] = Counter()
    for trace in sorted((run_dir / "traces").glob("*.json")):
        run = Run.load(trace)
        if run.sample_id not in right:
            continue
        gold = evidence.get(run.sample_id or "", [])
        out["samples"] += 1
        out["right"] += right[run.sample_id]
        kind = FORMATTED.get(run.agent)
        for step in run.steps:
            if step.kind == kind:
                out["formatted"] += 1
                out["well_formed"] += FORMAT_ERROR not in step.flags
                out["format_stopped"] += FORMAT_STOPPED in step.flags
            if step.recall is not None:
                out["recalls"] += 1
                out["recalls_found"] += holds_evidence(step.recall.memory, gold)
            if step.reread is not None and step.kind == "update":
                out["reread_updates"] += 1
                out["reread_found"] += holds_evidence(step.memory, gold)
            if step.kind == "decide" and step.reread is not None:
                out["first_hops"] += "code" not in step.reread.sub_question.lower()
            if step.kind == "final" and step.reread is not None and len(gold) > 1:
                answer = (step.answer or "").strip()
                out["places_found"] += len(answer) > 3 and answer in gold[1]
        out["asked"] += any(step.reread is not None for step in run.steps)
        root = [s for s in run.steps if s.kind == "update" and s.reread is None]
        out["root_holds"] += bool(root) and holds_evidence(root[-1].memory, gold)
    return out


def main() -> None:
    evidence, runs = evidence_and_runs(__doc__.splitlines()[0])
    print(
        "| run | right | well formed (format stops) | recalls (fact back) | samples rereading "
        "| reread updates (fact taken) | first hops (place found) | root notes hold evidence |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for run_dir in runs:
        if not (run_dir / "config.json").is_file():
            sys.exit(f"agent_formats.py: {run_dir} is not an eval run folder (no config.json)")
        c = count(run_dir, evidence)
        formed = "-"
        if c["formatted"]:
            formed = f"{c['well_formed']}/{c['formatted']} ({c['format_stopped']})"
        print(
            f"| {run_dir.name} | {c['right']}/{c['samples']} | {formed} "
            f"| {c['recalls']} ({c['recalls_found']}) | {c['asked']}/{c['samples']} "
            f"| {c['reread_updates']} ({c['reread_found']}) "
            f"| {c['first_hops']} ({c['places_found']}) | {c['root_holds']}/{c['samples']} |"
        )


if __name__ == "__main__":
    main()
