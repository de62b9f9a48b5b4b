"""How often an adapter's notes hold a made-up number, over the traces of check runs.

    .venv/bin/python recipes/smollm2/made_up_numbers.py RUN [RUN ...]

Each RUN is an `eval run` folder (recipes/smollm2/runs/checks/STAGE-SET). For every traced
sample it takes the share of memory updates whose notes hold a number that neither the
sample's document, its question nor a gold answer states (train/rewards.py
``unsupported_note_share``, the term ``reward.unsupported_penalty`` subtracts), and prints the
mean share and how many samples had any: e.g. "The special magic number ... is 11." written
before the needle came.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from statistics import mean

from longread.errors import UsageError
from longread.eval.traced import traced_samples
from longread.train.rewards import unsupported_note_share


def shares(run_dir: Path) -> list[float]:
    """The made-up-number share of every traced sample of an eval run folder."""
    out = []
    for traced in traced_samples(run_dir):
        document = f"{traced.sample.context}\n{traced.sample.question}"
        out.append(unsupported_note_share(traced.run, document, traced.sample.answers))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    for run_dir in parser.parse_args().runs:
        try:
            found = shares(run_dir)
        except UsageError as exc:
            sys.exit(f"made_up_numbers.py: {exc}")
        if not found:
            print(f"{run_dir.name}: no traces")
            continue
        with_any = sum(share > 0 for share in found)
        print(f"{run_dir.name}: mean share {mean(found):.2f}, {with_any} of {len(found)} with any")


if __name__ == "__main__":
    main()
