"""Where two runs' notes part: per sample, the first-pass updates whose replies are the same
text before the first that differs (issue 29: does a stage write the shipped adapter's notes?).

    .venv/bin/python recipes/smollm2/first_difference.py RUN_A RUN_B

Prints one line per sample both runs traced, then how many samples differ at the first update.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def first_pass_replies(trace: Path) -> list[str]:
    steps = json.loads(trace.read_text(encoding="utf-8"))["steps"]
    return [s["reply"] for s in steps if s["kind"] == "update" and not s.get("phase")]


def same_before_difference(a: list[str], b: list[str]) -> int:
    pairs = zip(a, b, strict=False)  # up to the shorter reading
    return next((i for i, (x, y) in enumerate(pairs) if x != y), min(len(a), len(b)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    args = parser.parse_args()
    counts = []
    for trace in sorted((args.run_a / "traces").glob("*.json")):
        other = args.run_b / "traces" / trace.name
        if other.is_file():
            same = same_before_difference(first_pass_replies(trace), first_pass_replies(other))
            counts.append(same)
            print(f"{trace.stem}: {same} update(s) the same before the first difference")
    differ = sum(c == 0 for c in counts)
    print(f"{differ} of {len(counts)} samples differ at the first update")


if __name__ == "__main__":
    main()
