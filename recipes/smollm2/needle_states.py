"""Where a memagent run on RULER needles wins or loses the needle, from its traces.

    .venv/bin/python recipes/smollm2/needle_states.py RUN_FOLDER [RUN_FOLDER ...]
    (e.g. results/v2/runs/memagent-adapter-ruler_niah_single_2-32768)

For every sample of an `eval run` folder: in what state were the notes when the section holding
the needle came (still empty, "No previous memory"; holding a made-up answer, a sentence about
the "number" with a value that is not the needle's; or holding filler), did that update write
the needle's value down (exactly, as a near-copy, or not at all), was it still in the final
notes. The counts say whether misses come from notes that drop the needle later, from notes
that never take it in, or from a value copied wrong, and from which state. The needle's value is
the sample's gold answer, read from the run's data (config.json); RULER's niah tasks only (the
made-up answer check reads number needles).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from difflib import SequenceMatcher
from pathlib import Path

from longread.agents.memagent import NO_MEMORY
from longread.errors import UsageError
from longread.eval.traced import traced_samples
from longread.trace import Run

# a sentence that gives "the ... number" a value: a made-up answer when it is not the gold's
CLAIM = re.compile(r"number[^.]*?\b(\d+)\b")
# a word of digits, hex and dashes: where a copied number or uuid would be
VALUE = re.compile(r"[0-9A-Za-z][0-9A-Za-z-]*[0-9A-Za-z]")
# how alike a written value must be to the needle's to count as a copy gone wrong
NEAR_COPY = 0.8


def notes_shown(prompt: str) -> str:
    """The notes an update prompt shows (the paper prompt set: 'Memory:' then 'Section:')."""
    return prompt.split("Memory:", 1)[1].split("Section:", 1)[0].strip()


def notes_state(notes: str, gold: str) -> str:
    if notes == NO_MEMORY:
        return "empty notes"
    if any(value != gold for value in CLAIM.findall(notes)):
        return "notes with a made-up answer"
    return "notes with filler"


def how_written(reply: str, gold: str) -> str:
    """'written' when the reply holds ``gold``, 'miscopied' when it holds a value nearly the same
    (a dropped, doubled or changed character or two, as the model does with long uuids),
    else 'skipped'."""
    if gold in reply:
        return "written"
    near = (SequenceMatcher(None, word, gold).ratio() for word in VALUE.findall(reply))
    return "miscopied" if max(near, default=0.0) >= NEAR_COPY else "skipped"


def sample_states(run: Run, gold: str) -> dict[str, object] | None:
    """The needle's story in one traced run, or None when no section holds ``gold``."""
    updates = [step for step in run.steps if step.kind == "update"]
    for index, step in enumerate(updates):
        prompt = step.messages[0]["content"]
        if gold in prompt.split("Section:", 1)[1]:
            return {
                "state": notes_state(notes_shown(prompt), gold),
                "written": how_written(step.reply, gold),
                "kept": gold in updates[-1].reply,
                "section": index,
                "sections": len(updates),
            }
    return None


def count(run_dir: Path) -> Counter[str]:
    """How many of the run's finished samples met the needle in each state, and how many
    were right."""
    counts: Counter[str] = Counter()
    for traced in traced_samples(run_dir, metric="sub_em"):
        states = sample_states(traced.run, traced.sample.answers[0])
        if states is None:
            continue
        counts[f"{states['state']}: needle {states['written']}"] += 1
        if states["written"] == "written" and not states["kept"]:
            counts["needle written, then dropped"] += 1
        counts["right" if traced.right else "wrong"] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="eval run folders")
    for run in parser.parse_args().runs:
        try:
            counts = count(run)
        except UsageError as exc:
            sys.exit(f"needle_states.py: {exc}")
        print(f"{run}:")
        for name, number in sorted(counts.items()):
            print(f"  {name}: {number}")


if __name__ == "__main__":
    main()
