"""Would an exit that needs a note restating the question (the focused rereads' ``Restating``:
at least 60% of the question's terms) have taken each exit a run took? Read from the traces,
no model (stop 70: the grounded exit counts a note sharing one term as about the question, and
the probe's yes on a filler note sharing "number" stopped the held-out archive cell).

    .venv/bin/python recipes/smollm2/exit_restates.py RUN_DIR [RUN_DIR ...]

Per run: the exits honoured (``gate_exit`` on a probe or update step), how many of them came
on a memory with a note restating the question, and, for each that did not, the sample, whether
its answer was right, and the memory's start. An exit whose memory restates the question reads
the same under such a rule; one that does not would read on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from longread.citations.focus import Restating, restates
from longread.eval.store import read_results


def exit_memories(trace: dict) -> list[str]:
    """The memory each honoured exit of ``trace`` stopped on (the last memory written)."""
    memory, found = "", []
    for step in trace["steps"]:
        if step["kind"] == "update" and step.get("memory"):
            memory = step["memory"]
        if "gate_exit" in (step.get("flags") or []):
            found.append(memory)
    return found


def main(runs: list[str]) -> None:
    for run in map(Path, runs):
        exits = restating = 0
        missing = []
        for row in read_results(run):
            trace = json.loads((run / (row.trace or f"traces/{row.sample_id}.json")).read_text())
            rule = Restating(trace["question"], skip_questions=True, least=1)  # as the exit
            for memory in exit_memories(trace):
                exits += 1
                if restates(memory, rule):
                    restating += 1
                else:
                    right = (row.score or {}).get("match_all") or (row.score or {}).get("sub_em")
                    missing.append(f"  {row.sample_id} right={bool(right)}: {memory[:90]!r}")
        print(f"{run.name}: {restating} of {exits} exits on a memory restating the question")
        print("\n".join(missing))


if __name__ == "__main__":
    main(sys.argv[1:] or sys.exit(__doc__))
