"""Where a memagent run on RULER needles wins or loses the needle, from its traces.

    .venv/bin/python recipes/smollm2/needle_states.py RUN_FOLDER [RUN_FOLDER ...]
    (e.g. results/v2/runs/memagent-adapter-ruler_niah_single_2-32768)

For every sample of an `eval run` folder: were the notes still empty ("No previous memory")
when the section holding the needle came, did that update write the needle's key down, was
the key still in the final notes, and was the answer right. The counts say whether misses
come from notes that drop the needle later or from notes that never take it in (and in what
state the notes were then). Needles whose question names a key (niah_single_2/3) only.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path

from longread.agents.memagent import NO_MEMORY

KEY = re.compile(r"for (\S+) mentioned in the provided text")


def notes_shown(prompt: str) -> str:
    """The notes an update prompt shows (the paper prompt set: 'Memory:' then 'Section:')."""
    return prompt.split("Memory:", 1)[1].split("Section:", 1)[0].strip()


def sample_states(trace: dict) -> dict[str, object] | None:
    """The needle's story in one trace, or None when its question names no key."""
    updates = [s for s in trace["steps"] if s["kind"] == "update"]
    match = KEY.search(updates[0]["messages"][0]["content"]) if updates else None
    if not match:
        return None
    key = match.group(1)
    for index, step in enumerate(updates):
        prompt = step["messages"][0]["content"]
        if key in prompt.split("Section:", 1)[1]:
            return {
                "clean": notes_shown(prompt) == NO_MEMORY,
                "written": key in step["reply"],
                "kept": key in updates[-1]["reply"],
                "section": index,
                "sections": len(updates),
            }
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="eval run folders")
    for run in parser.parse_args().runs:
        if not (run / "results.sqlite").is_file():
            sys.exit(f"needle_states.py: {run} is not an eval run folder (no results.sqlite)")
        counts: Counter[str] = Counter()
        with sqlite3.connect(run / "results.sqlite") as db:
            rows = db.execute("select sample_id, score from results where status = 'done'")
            for sample_id, score in rows.fetchall():
                trace = json.loads((run / "traces" / f"{sample_id}.json").read_text())
                states = sample_states(trace)
                if states is None:
                    continue
                right = bool(json.loads(score).get("sub_em"))
                notes = "empty notes" if states["clean"] else "notes with filler"
                counts[f"{notes}: needle {'written' if states['written'] else 'skipped'}"] += 1
                if states["written"] and not states["kept"]:
                    counts["needle written, then dropped"] += 1
                counts["right" if right else "wrong"] += 1
        print(f"{run}:")
        for name, count in sorted(counts.items()):
            print(f"  {name}: {count}")


if __name__ == "__main__":
    main()
