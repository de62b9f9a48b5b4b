"""How many of a rememr1 run's updates format stops would leave well formed, from its traces.

    .venv/bin/python recipes/smollm2/format_stop_replay.py RUN [RUN ...]

For each ``eval run`` folder of rememr1 read without ``--format-stop``: its step replies well
formed as they were, and as they would be had each ended at the first format stop it wrote
(``agents.rememr1.FORMAT_STOPS``), cut after the closing tag as the agent cuts it. Greedy
decoding writes the same text up to the stop, so each reply's cut is the one a run with format
stops would get for that call; the later calls of such a run would see other memories, so the
count is an estimate, not a run (stop 73: it gave exactly what the four `CELLS=formatstop` runs
then measured).
"""

from __future__ import annotations

import sys
from pathlib import Path

from longread.agents.answer import memory_text
from longread.agents.rememr1 import FORMAT_STOPS, cut_at_format_stop, parse_step_reply
from longread.trace import Run


def stopped(text: str) -> str:
    """``text`` as a format stop would have ended it: at the first stop string in it."""
    found = [(text.find(stop), stop) for stop in FORMAT_STOPS if stop in text]
    if not found:
        return text
    at, stop = min(found)
    return cut_at_format_stop(text[:at] + stop) or text


def count(run_dir: Path) -> tuple[int, int, int]:
    """(updates, well formed as they were, well formed had they stopped)."""
    updates = formed = would = 0
    for trace in sorted((run_dir / "traces").glob("*.json")):
        for step in Run.load(trace).steps:
            if step.kind != "update":
                continue
            text = memory_text(step)
            updates += 1
            formed += parse_step_reply(text).well_formed
            would += parse_step_reply(stopped(text)).well_formed
    return updates, formed, would


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("| run | updates well formed | with format stops (estimate) |")
    print("|---|---:|---:|")
    for run_dir in map(Path, sys.argv[1:]):
        if not (run_dir / "traces").is_dir():
            sys.exit(f"format_stop_replay.py: {run_dir} has no traces/ (not an eval run folder)")
        updates, formed, would = count(run_dir)
        share = f" ({would / updates:.0%})" if updates else ""
        print(f"| {run_dir.name} | {formed}/{updates} | {would}/{updates}{share} |")


if __name__ == "__main__":
    main()
