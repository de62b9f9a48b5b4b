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
import json
import re
import sys
from pathlib import Path

from longread.eval.compare import is_right
from longread.eval.store import DONE, RunStore

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from same_run import first_difference  # scripts/ is not a package


def outcomes(run_dir: Path) -> dict[str, bool]:
    """The run's finished samples, right or not."""
    if not (run_dir / "config.json").is_file():
        sys.exit(f"divergence.py: {run_dir} is not an eval run folder (no config.json)")
    with RunStore(run_dir) as store:
        return {r.sample_id: is_right(r, "headline") for r in store.results() if r.status == DONE}


def first_parting(a: Path, b: Path) -> tuple[int, str]:
    """The index of the first call whose reply differs between two traces of one sample, and
    ``option`` when the prompts there differ or ``machine`` when they are the same
    (``scripts/same_run.py``'s test; -1, ``none`` when every call agrees)."""
    traces = [json.loads(path.read_text()) for path in (a, b)]
    said = first_difference(*traces) or ""
    found = re.match(r"call (\d+): a different (prompt|reply)", said)
    if found is None:
        return -1, "none"
    return int(found[1]), "option" if found[2] == "prompt" else "machine"


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
        trace = f"traces/{sample}.json"
        index, why = first_parting(args.run_a / trace, args.run_b / trace)
        winner = "B" if right_b[sample] else "A"
        counts[(winner, why)] = counts.get((winner, why), 0) + 1
        print(f"| {sample} | {winner} | {index} | {why} |")
    print()
    for (winner, why), n in sorted(counts.items()):
        print(f"only {winner} right, parted by the {why}: {n}")


if __name__ == "__main__":
    main()
