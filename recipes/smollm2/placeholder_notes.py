"""How often an adapter turns the empty-memory placeholder into a made-up note, over eval runs.

    .venv/bin/python recipes/smollm2/placeholder_notes.py RUN [RUN ...]

memagent starts from the notes "No previous memory". Stage sft29q's first update often fuses
it with the question into a note: "The special magic number for old-pond mentioned in the
provided text is no previous memory." (stop 41). Usually the needle's section replaces it;
where it survives to the end, the answer is lost. For every traced sample of each `eval run`
folder this counts the samples where an update wrote such a note (the placeholder inside
longer notes), those where the last update still held it, and how many of each were
answered right (the run's headline metric, as `longread eval compare` counts it).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from longread.agents.memagent import NO_MEMORY
from longread.eval.compare import is_right
from longread.eval.store import DONE, RunStore
from longread.trace import Run

PLACEHOLDER = re.compile(re.escape(NO_MEMORY), re.IGNORECASE)


def fused(memory: str | None) -> bool:
    """Whether ``memory`` holds the placeholder inside other notes (not the placeholder alone)."""
    text = (memory or "").strip().rstrip(".")
    return bool(PLACEHOLDER.search(text)) and text.lower() != NO_MEMORY.lower()


def count(run_dir: Path) -> dict[str, int]:
    """The run's samples: traced, with a fused placeholder written / kept to the end, and right
    among each."""
    if not (run_dir / "config.json").is_file():
        sys.exit(f"placeholder_notes.py: {run_dir} is not an eval run folder (no config.json)")
    with RunStore(run_dir) as store:
        right = {r.sample_id: is_right(r, "headline") for r in store.results() if r.status == DONE}
    out = dict.fromkeys(("traced", "written", "written_right", "kept", "kept_right"), 0)
    for trace in sorted((run_dir / "traces").glob("*.json")):
        run = Run.load(trace)
        if run.sample_id not in right:
            continue
        memories = [step.memory for step in run.steps if step.kind == "update"]
        out["traced"] += 1
        ok = int(right[run.sample_id])
        if any(fused(m) for m in memories):
            out["written"] += 1
            out["written_right"] += ok
        if memories and fused(memories[-1]):
            out["kept"] += 1
            out["kept_right"] += ok
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    print("| run | traced | placeholder written (right) | kept to the end (right) |")
    print("|---|---:|---:|---:|")
    for run_dir in parser.parse_args().runs:
        c = count(run_dir)
        print(
            f"| {run_dir.name} | {c['traced']} | {c['written']} ({c['written_right']}) "
            f"| {c['kept']} ({c['kept_right']}) |"
        )


if __name__ == "__main__":
    main()
