"""Two stages on the same held-out documents: paired wins and losses, and McNemar's exact test.

    .venv/bin/python recipes/smollm2/compare_checks.py RUN_A RUN_B [RUN_A2 RUN_B2 ...]

Each RUN is an `eval run` folder of check_stage.sh (recipes/smollm2/runs/checks/STAGE-SET);
pairs are given A then B, and every pair must hold the same sample ids (one set read by two
stages). Pooled over the pairs it prints each stage's accuracy (the strict judge, as the
checks' summaries), the documents only A got and only B got, and the two-sided exact McNemar
p-value: how likely a split at least this uneven is when the stages are equally good. With
few discordant documents nothing is significant; the script says so rather than a verdict.
`longread eval compare` does the same for any two runs (any metric, with seconds and share
read); this script keeps the checks' strict judge and its pooled one-line summary.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

from longread.eval.compare import mcnemar_exact


def strict_by_sample(run: Path) -> dict[str, float]:
    """The strict score of every done sample of an eval run folder."""
    if not (run / "results.sqlite").is_file():
        sys.exit(f"compare_checks.py: {run} is not an eval run folder (no results.sqlite)")
    with sqlite3.connect(run / "results.sqlite") as db:
        rows = db.execute("select sample_id, score from results where status = 'done'")
        return {sample: float(json.loads(score)["strict"]) for sample, score in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="RUN_A RUN_B [RUN_A2 RUN_B2 ...]")
    args = parser.parse_args()
    if len(args.runs) % 2:
        sys.exit("compare_checks.py: give the runs in pairs, A then B")
    a_right = b_right = total = 0
    only_a, only_b = [], []
    for run_a, run_b in zip(args.runs[::2], args.runs[1::2], strict=True):
        a, b = strict_by_sample(run_a), strict_by_sample(run_b)
        if set(a) != set(b):
            sys.exit(f"compare_checks.py: {run_a} and {run_b} hold different samples")
        for sample in sorted(a):
            total += 1
            a_right += a[sample] == 1.0
            b_right += b[sample] == 1.0
            if a[sample] == 1.0 and b[sample] != 1.0:
                only_a.append(sample)
            elif b[sample] == 1.0 and a[sample] != 1.0:
                only_b.append(sample)
    p = mcnemar_exact(len(only_a), len(only_b))
    print(f"A: {a_right}/{total}  B: {b_right}/{total}  (the same {total} documents)")
    print(f"only A: {len(only_a)} {only_a}")
    print(f"only B: {len(only_b)} {only_b}")
    verdict = "significant at 5%" if p < 0.05 else "not significant at 5%"
    print(f"McNemar exact two-sided p = {p:.3f} ({verdict})")


if __name__ == "__main__":
    main()
