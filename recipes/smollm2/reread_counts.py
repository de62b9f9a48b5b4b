"""How often focused rereads acted in eval runs, counted from their traces' flags (stop 68).

    .venv/bin/python recipes/smollm2/reread_counts.py results/v2/runs/RUN [RUN ...]

Per run: samples, reread calls (``focused_reread``), rereads whose shown sentences the rule
quoted into the memory (``focus_quoted``: the model's own notes still did not restate the
question), memories restored (``notes_restored``), and the samples that reread.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

FLAGS = ("focused_reread", "focus_quoted", "notes_restored")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="eval run folders with traces/")
    for run in parser.parse_args().runs:
        counts = dict.fromkeys(FLAGS, 0)
        rereading, samples = [], 0
        for path in sorted((run / "traces").glob("*.json")):
            samples += 1
            flags = [step["flags"] for step in json.loads(path.read_text())["steps"]]
            for flag in FLAGS:
                counts[flag] += sum(flag in step for step in flags)
            if any(FLAGS[0] in step for step in flags):
                rereading.append(path.stem)
        print(f"{run.name}: samples {samples}, rereads {counts['focused_reread']}, quoted "
              f"{counts['focus_quoted']}, restored {counts['notes_restored']}; "
              f"rereading: {', '.join(rereading) or 'none'}")  # fmt: skip


if __name__ == "__main__":
    main()
