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
import json
import sys
from pathlib import Path
from statistics import mean

from longread.data.loaders import data_files, load_files
from longread.trace import Run
from longread.train.rewards import unsupported_note_share


def shares(run_dir: Path) -> list[float]:
    """The made-up-number share of every traced sample of an eval run folder."""
    config = run_dir / "config.json"
    if not config.is_file():
        sys.exit(f"made_up_numbers.py: {run_dir} is not an eval run folder (no config.json)")
    data = run_dir / json.loads(config.read_text())["data"]
    # a run names its data file, or the folder of its files (check_stage.sh's sets)
    files = data_files(str(data)) if data.is_dir() else [data]
    samples = {s.id: s for s in load_files(files)}
    out = []
    for trace in sorted((run_dir / "traces").glob("*.json")):
        run = Run.load(trace)
        sample = samples[run.sample_id or ""]
        document = f"{sample.context}\n{sample.question}"
        out.append(unsupported_note_share(run, document, sample.answers))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    for run_dir in parser.parse_args().runs:
        found = shares(run_dir)
        if not found:
            print(f"{run_dir.name}: no traces")
            continue
        with_any = sum(share > 0 for share in found)
        print(f"{run_dir.name}: mean share {mean(found):.2f}, {with_any} of {len(found)} with any")


if __name__ == "__main__":
    main()
