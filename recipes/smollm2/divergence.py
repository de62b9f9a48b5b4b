"""Where two eval runs of the same samples first part, and why: an option, or the machine.

    .venv/bin/python recipes/smollm2/divergence.py RUN_A RUN_B

Two runs of one adapter, one with a memory option (say ``--focused-notes on``) and one
without, read the same documents greedily. Until the option first acts their prompts are the
same, so their replies should be too; but greedy decoding on a 135M model depends on the
machine's kernels (AVX2 against AVX-512), so a cell run in an earlier session may part from
one run now with no option acting. For every sample the two runs answered differently (one
right, one wrong on the headline metric, as ``longread eval compare`` counts), this finds the
first model call whose reply differs and says whether the prompts there were the same
(``machine``: the option had not acted) or not (``option``: what the option changed reached
the model), and which run was right.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from longread.eval.compare import is_right
from longread.eval.store import DONE, RunStore
from longread.trace import Run


def outcomes(run_dir: Path) -> dict[str, bool]:
    """The run's finished samples, right or not."""
    if not (run_dir / "config.json").is_file():
        sys.exit(f"divergence.py: {run_dir} is not an eval run folder (no config.json)")
    with RunStore(run_dir) as store:
        return {r.sample_id: is_right(r, "headline") for r in store.results() if r.status == DONE}


def first_parting(a: Run, b: Run) -> tuple[int, str]:
    """The index of the first call whose reply differs, and ``machine`` when its prompts were
    the same or ``option`` when they were not (-1, ``none`` when every reply is the same)."""
    for index, (step_a, step_b) in enumerate(zip(a.steps, b.steps, strict=False)):
        if step_a.messages != step_b.messages:
            return index, "option"
        if step_a.reply != step_b.reply:
            return index, "machine"
    return -1, "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    args = parser.parse_args()
    right_a, right_b = outcomes(args.run_a), outcomes(args.run_b)
    counts: dict[tuple[str, str], int] = {}
    print("| sample | right | first differing call | why |")
    print("|---|---|---:|---|")
    for sample in sorted(set(right_a) & set(right_b)):
        if right_a[sample] == right_b[sample]:
            continue
        a = Run.load(args.run_a / "traces" / f"{sample}.json")
        b = Run.load(args.run_b / "traces" / f"{sample}.json")
        index, why = first_parting(a, b)
        winner = "B" if right_b[sample] else "A"
        counts[(winner, why)] = counts.get((winner, why), 0) + 1
        print(f"| {sample} | {winner} | {index} | {why} |")
    print()
    for (winner, why), n in sorted(counts.items()):
        print(f"only {winner} right, parted by the {why}: {n}")


if __name__ == "__main__":
    main()
