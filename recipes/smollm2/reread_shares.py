"""How much of the question the sentences a focused reread showed share, run by run.

For each ``focused_reread`` step in the traces of the run folders given, the share of the
question's terms held by the best sentence shown (what ``citations/focus.py``'s
``LEAST_SHARE`` bounds). Prints, per folder, the rereads, how many fell below ``--below``,
and the smallest and largest share; ``--each`` prints every reread. Stop 53's runs (two
shared terms were enough then): HotpotQA 8K 43 of 45 below 0.6 (0.22-0.71); the held-out
harbour, ledger and archive wordings and RULER's 0.62-1.0, none below. Stop 54's held-out
locker wording: 17 rereads at 0.75, 9 of them with their notes (the needle's value in the
adapter's own words) cut by grounded notes, which found no span of the section for them.

    .venv/bin/python recipes/smollm2/reread_shares.py results/v2/runs/*reread*
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from longread.citations.align import words
from longread.citations.evidence import question_terms
from longread.trace import FOCUSED_REREAD, NOTES_UNGROUNDED

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def shown_text(prompt: str) -> str:
    """The section a reread's prompt showed: the focus sentences are joined on one line."""
    return prompt.split("Section:\n", 1)[1].split("\n", 1)[0]


def shares(run: Path) -> list[tuple[str, int, float, str, bool]]:
    """(sample, step, share, first sentence shown, whether grounded notes cut its notes) of
    each focused reread in ``run``."""
    found = []
    for path in sorted((run / "traces").glob("*.json")):
        trace = json.loads(path.read_text())
        terms = question_terms(trace["question"])
        for step in trace["steps"]:
            if FOCUSED_REREAD not in step.get("flags", []):
                continue
            shown = shown_text(step["messages"][-1]["content"])
            best = max(len(terms & words(s)) for s in SENTENCE_END.split(shown))
            cut = NOTES_UNGROUNDED in step["flags"]
            found.append((trace["sample_id"], step["step"], best / len(terms), shown[:80], cut))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--below", type=float, default=0.6)
    parser.add_argument("--each", action="store_true", help="print every reread")
    args = parser.parse_args()
    for run in args.runs:
        found = shares(run)
        if args.each:
            for sample, step, share, shown, cut in found:
                print(f"  {sample} step {step}: {share:.2f} {'cut ' if cut else ''}{shown}")
        values = [share for _, _, share, _, _ in found]
        cut = sum(found_cut for *_, found_cut in found)
        low = sum(share < args.below for share in values)
        span = f"{min(values):.2f}-{max(values):.2f}" if values else "-"
        print(
            f"{run.name}: {len(values)} rereads, {low} below {args.below}, shares {span}, "
            f"{cut} with their notes cut by grounded notes"
        )


if __name__ == "__main__":
    main()
