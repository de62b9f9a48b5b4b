"""Self-distilled training data (issue 29): a teacher run's own update replies on each sample.

    .venv/bin/python recipes/smollm2/self_distill.py RUN_DIR DATA.jsonl OUT.jsonl

RUN_DIR is an ``eval run`` folder of memagent read in the papers' order without gates (the
teacher: e.g. the shipped adapter as it ships); DATA.jsonl the samples it read. OUT.jsonl gets
every sample with its trace's first-pass updates in ``meta["teacher_updates"]``
(``longread.train.distill``); a training stage that lists OUT's folder trains those samples'
update calls on the teacher's replies instead of the oracle's (``train/oracle.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from longread.data.loaders import load_files
from longread.errors import UsageError
from longread.train.distill import distilled_record, teacher_prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the teacher's eval run folder")
    parser.add_argument("data", type=Path, help="the samples it read (JSONL)")
    parser.add_argument("out", type=Path, help="where the distilled samples go (JSONL)")
    args = parser.parse_args()
    try:
        records = distilled(args.run, args.data)
    except UsageError as error:
        sys.exit(f"self_distill.py: {error}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    updates = sum(len(r["meta"]["teacher_updates"]) for r in records)
    print(f"wrote {len(records)} samples, {updates} teacher updates, to {args.out}")


def distilled(run: Path, data: Path) -> list[dict]:
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    prompts = teacher_prompts(config)
    samples = load_files([data])
    missing = [s.id for s in samples if not (run / "traces" / f"{s.id}.json").is_file()]
    if missing:
        raise UsageError(f"{len(missing)} of {len(samples)} samples have no trace in {run}")
    return [
        distilled_record(s, json.loads((run / "traces" / f"{s.id}.json").read_text()), prompts)
        for s in samples
    ]


if __name__ == "__main__":
    main()
