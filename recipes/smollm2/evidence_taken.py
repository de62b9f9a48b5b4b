"""How often an update takes in the gold evidence its section holds, over eval runs.

    .venv/bin/python recipes/smollm2/evidence_taken.py DATA RUN [RUN ...]

Issue 26, target 6: with the shipped adapter, `--section-first` keeps niah_single_2 at 8K
(100%) but loses HotpotQA 8K (10% against 25% in the papers' order). Focused rereads catch a
needle the notes missed, because a needle restates its question; a HotpotQA supporting
sentence shares only a few of the question's terms, so nothing catches it. This counts, for
every traced sample of each `eval run` folder over the samples of DATA (the run's
`--data` file), the updates (first reads, not rereads) whose section holds an evidence
sentence of the sample (`data/evidence.py`), and those after which the notes hold most of one
such sentence's words (60%), a supporting fact copied or closely reworded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reread_would_act import section_of  # this folder's: the section an update prompt showed

from longread.citations.align import words
from longread.data.evidence import evidence_sentences
from longread.data.loaders import load_samples
from longread.eval.compare import is_right
from longread.eval.store import DONE, RunStore
from longread.trace import FOCUSED_REREAD, Run

TAKEN_SHARE = 0.6  # the share of an evidence sentence's words the notes must hold
PREFIX = 60  # an evidence sentence is in a section when its first characters are


def holds_evidence(text: str | None, sentences: list[str]) -> bool:
    """Whether ``text`` holds most of the words (``TAKEN_SHARE``) of one of ``sentences``."""
    notes = words(text or "")
    return any(len(words(s) & notes) >= TAKEN_SHARE * len(words(s)) for s in sentences)


def right_by_sample(run_dir: Path) -> dict[str | None, bool]:
    """Whether each finished sample of an eval run is right, as `longread eval compare` counts."""
    with RunStore(run_dir) as store:
        return {r.sample_id: is_right(r, "headline") for r in store.results() if r.status == DONE}


def taken(run_dir: Path, evidence: dict[str, list[str]]) -> tuple[int, int]:
    """The run's first-read updates whose section held evidence, and those whose notes took
    some of it in."""
    seen = took = 0
    for trace in sorted((run_dir / "traces").glob("*.json")):
        run = Run.load(trace)
        for step in run.steps:
            if step.kind != "update" or FOCUSED_REREAD in step.flags:
                continue
            section = section_of(step.messages[-1]["content"])  # not the notes shown with it
            inside = [s for s in evidence.get(run.sample_id, []) if s[:PREFIX] in section]
            if not inside:
                continue
            seen += 1
            took += holds_evidence(step.memory, inside)
    return seen, took


def evidence_and_runs(description: str) -> tuple[dict[str, list[str]], list[Path]]:
    """The command line's DATA RUN [RUN ...]: each sample's evidence sentences, and the runs."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("data", type=Path, help="the runs' --data file")
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    return {s.id: evidence_sentences(s) for s in load_samples(args.data)}, args.runs


def main() -> None:
    evidence, runs = evidence_and_runs(__doc__.splitlines()[0])
    print("| run | updates at evidence | evidence taken in |")
    print("|---|---:|---:|")
    for run_dir in runs:
        if not (run_dir / "traces").is_dir():
            sys.exit(f"evidence_taken.py: {run_dir} has no traces/ (not an eval run folder)")
        seen, took = taken(run_dir, evidence)
        share = f"{took / seen:.0%}" if seen else "-"
        print(f"| {run_dir.name} | {seen} | {took} ({share}) |")


if __name__ == "__main__":
    main()
