"""Write longread samples (any format ``longread.data.load_samples`` reads) as a verl RL
dataset: one Parquet row per sample, the document and gold answers in ``extra_info``.

    python examples/verl/make_dataset.py samples.jsonl train.parquet

Needs pyarrow (longread's ``eval`` extra). Each row is ``longread.train.verl.dataset_row``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from longread.data.loaders import load_samples
from longread.train.verl import dataset_row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", type=Path, help="samples file (JSONL, JSON or Parquet)")
    parser.add_argument("out", type=Path, help="Parquet file to write")
    args = parser.parse_args()
    rows = [dataset_row(sample, i) for i, sample in enumerate(load_samples(args.samples))]
    pq.write_table(pa.Table.from_pylist(rows), args.out)
    print(f"wrote {len(rows)} rows to {args.out}")


if __name__ == "__main__":
    main()
