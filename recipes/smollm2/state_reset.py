"""State-reset samples for GRPO (issue 26): memory states the adapter itself reached along
long documents, each with the next few sections as its document.

    .venv/bin/python recipes/smollm2/state_reset.py RUN_FOLDER [RUN_FOLDER ...] --out OUT.jsonl

Each RUN_FOLDER is an `eval run` folder of memagent with the adapter being trained on
*training* documents (never an evaluation seed). From every trace it takes:

- **arrival**: the notes the policy held when the section with the gold answer came (empty,
  filler, a made-up answer: whatever it had written), and that section;
- **carry**: the notes at a later section once they held the answer, and the next two
  sections (the long stretch where notes must survive unchanged);
- **before**: the notes one or two sections before the gold's, and the sections from there up
  to the gold's (where a made-up answer or filler first gets written: an arrival state only
  rewards undoing it, this one rewards not writing it).

A sample's ``meta["memory"]`` holds the notes; `longread train` starts every rollout of it
from them (train/rollouts.py), so a group of 8 rollouts costs 2-3 calls each instead of a
32-section document. Every sample keeps the gold in its document or its notes, so a rollout
can always earn the reward. Sections are cut out of the traced prompts (the paper prompt
set, in either reading order), so the new document is exactly the text the policy read
there; a state read in the section-first order (``--section-first`` runs) keeps that order
(``meta["section_first"]``), so its rollouts see the prompts that went wrong.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
from pathlib import Path

from longread.data.loaders import data_files, load_files
from longread.train.rollouts import reset_state_record

KINDS = ("arrival", "carry", "before")
SECTION, INSTRUCTION = "Section:\n", "\n\nUpdate the memory:"
# The paper prompt set's update prompt in the section-first order: section, problem, memory.
PROBLEM, MEMORY_FIRST = (
    "\n\nProblem: ",
    "Memory (what you kept from the sections before this one):\n",
)


def section_of(prompt: str, section_first: bool = False) -> str:
    """The section an update prompt shows (paper prompt set)."""
    end = PROBLEM if section_first else INSTRUCTION
    return prompt.split(SECTION, 1)[1].rsplit(end, 1)[0].strip()


def notes_of(prompt: str, section_first: bool = False) -> str:
    """The notes an update prompt shows (paper prompt set)."""
    if section_first:
        return prompt.split(MEMORY_FIRST, 1)[1].rsplit(INSTRUCTION, 1)[0].strip()
    return prompt.split("Memory:", 1)[1].split(SECTION, 1)[0].strip()


def states(trace: dict, sample, rng: random.Random) -> list[dict]:
    """The arrival and carry samples of one trace (see the module docstring)."""
    gold = sample.answers[0]
    order = bool(trace.get("config", {}).get("section_first"))
    updates = [s for s in trace["steps"] if s["kind"] == "update"]
    prompts = [s["messages"][0]["content"] for s in updates]
    sections = [section_of(p, order) for p in prompts]
    notes = [notes_of(p, order) for p in prompts]
    arrival = next((i for i, text in enumerate(sections) if gold in text), None)
    if arrival is None:
        return []
    out = [_state(sample, "arrival", notes[arrival], sections[arrival : arrival + 1], order)]
    kept = [i for i in range(arrival + 1, len(prompts) - 1) if gold in notes[i]]
    if kept:
        at = rng.choice(kept)
        out.append(_state(sample, "carry", notes[at], sections[at : at + 2], order))
    if arrival > 0:  # drawn after carry's, so earlier arrival/carry files come out the same
        start = max(0, arrival - rng.choice((1, 2)))
        out.append(_state(sample, "before", notes[start], sections[start : arrival + 1], order))
    return out


def _state(sample, kind: str, notes: str, sections: list[str], section_first: bool) -> dict:
    state_id = f"{sample.id}-{kind}" + ("-sf" if section_first else "")
    return reset_state_record(sample, state_id, kind, notes, sections, section_first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="eval run folders")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--kinds", default="arrival,carry", help="which states to keep (comma-separated)"
    )
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    if not kinds or not set(kinds) <= set(KINDS):
        sys.exit(f"state_reset.py: --kinds takes {', '.join(KINDS)}, not {args.kinds!r}")
    rng = random.Random(args.seed)
    rows = []
    for run in args.runs:
        if not (run / "results.sqlite").is_file():
            sys.exit(f"state_reset.py: {run} is not an eval run folder (no results.sqlite)")
        data = str(run / json.loads((run / "config.json").read_text())["data"])
        files = data_files(data) if Path(data).is_dir() else [Path(data)]
        samples = {sample.id: sample for sample in load_files(files)}
        with sqlite3.connect(run / "results.sqlite") as db:
            done = db.execute("select sample_id from results where status = 'done'").fetchall()
        for (sample_id,) in done:
            trace = json.loads((run / "traces" / f"{sample_id}.json").read_text())
            rows += states(trace, samples[sample_id], rng)
    rows = [r for r in rows if r["meta"]["state"] in kinds]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    kinds = [r["meta"]["state"] for r in rows]
    print(f"{args.out}: " + ", ".join(f"{kinds.count(k)} {k}" for k in KINDS) + " states")


if __name__ == "__main__":
    main()
