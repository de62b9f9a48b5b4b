"""Whether two eval run folders made the same run: per sample, the same chunks (each update
call's prompt), the same replies and the same final answer. Used to show that a speed option
(a faster tokenizer, batched decoding) changes nothing a user sees:

    .venv/bin/python scripts/same_run.py RUN_BEFORE RUN_AFTER

Prints one line per sample that differs (and where it first differs), then a summary; exits 1
when any sample differs, 2 when the folders share no finished sample.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def traces(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The run's traces by sample id."""
    found = {}
    for path in sorted((run_dir / "traces").glob("*.json")):
        trace = json.loads(path.read_text())
        found[trace["sample_id"]] = trace
    return found


def first_difference(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """Where two traces of one sample first differ, in words; None when they agree."""
    if len(before["steps"]) != len(after["steps"]):
        return f"{len(before['steps'])} calls before, {len(after['steps'])} after"
    for index, (old, new) in enumerate(zip(before["steps"], after["steps"], strict=True)):
        if old["messages"] != new["messages"]:
            return f"call {index}: a different prompt (chunk {old.get('chunk_index')})"
        if old["reply"] != new["reply"]:
            return f"call {index}: a different reply"
    if before["answer"] != after["answer"]:
        return f"answer {before['answer']!r} before, {after['answer']!r} after"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    before, after = traces(args.before), traces(args.after)
    shared = sorted(set(before) & set(after))
    if not shared:
        print("the two folders share no finished sample", file=sys.stderr)
        return 2
    differing = 0
    for sample_id in shared:
        difference = first_difference(before[sample_id], after[sample_id])
        if difference is not None:
            differing += 1
            print(f"{sample_id}: {difference}")
    same = len(shared) - differing
    print(f"{len(shared)} samples compared: {same} identical, {differing} differ")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
