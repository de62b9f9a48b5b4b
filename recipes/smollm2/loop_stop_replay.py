"""What loop stops would have done to a rememr1 run, from its traces.

    .venv/bin/python recipes/smollm2/loop_stop_replay.py RUN [RUN ...]

For each ``eval run`` folder of rememr1 read without ``--loop-stop``: how many step replies a
loop stop would have ended (``llm/loops.py``, the cut the embedded model makes as it decodes),
in how many of those the cut reply reads otherwise than the whole one (another ``<update>`` or
``<recall>``, or well formed where it was not, or the reverse), and the share of the run's
decoded tokens past the cuts (estimated by bytes: a cut's share of its reply's bytes times the
reply's tokens). Greedy decoding writes the same text up to the cut, so where no cut reply reads
otherwise, a run with loop stops gives the same memories and answers and decodes that much less.
"""

from __future__ import annotations

import sys
from pathlib import Path

from longread.agents.rememr1 import parse_step_reply
from longread.llm.loops import cut_loop
from longread.trace import Run


def replay(run_dir: Path) -> tuple[int, int, int, float]:
    """(step replies, replies a loop stop ends, of those read otherwise, tokens past the cuts)."""
    replies = stopped = changed = 0
    tokens = saved = 0.0
    for trace in sorted((run_dir / "traces").glob("*.json")):
        for step in Run.load(trace).steps:
            tokens += step.completion_tokens
            if step.kind != "update":
                continue
            replies += 1
            cut = cut_loop(step.reply)
            if cut is None:
                continue
            stopped += 1
            whole, ended = parse_step_reply(step.reply), parse_step_reply(cut)
            changed += (whole.update, whole.recall, whole.well_formed) != (
                ended.update,
                ended.recall,
                ended.well_formed,
            )
            saved += step.completion_tokens * (1 - len(cut.encode()) / len(step.reply.encode()))
    return replies, stopped, changed, saved / tokens if tokens else 0.0


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(
        "| run | step replies | ended by a loop stop | of those read otherwise "
        "| decoded tokens saved (est.) |"
    )
    print("|---|---:|---:|---:|---:|")
    for run_dir in map(Path, sys.argv[1:]):
        if not (run_dir / "traces").is_dir():
            sys.exit(f"loop_stop_replay.py: {run_dir} has no traces/ (not an eval run folder)")
        replies, stopped, changed, share = replay(run_dir)
        print(f"| {run_dir.name} | {replies} | {stopped} | {changed} | {share:.0%} |")


if __name__ == "__main__":
    main()
