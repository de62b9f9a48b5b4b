"""Whether `--focused-notes on` ever cleared evidence, over HotpotQA eval runs.

    .venv/bin/python recipes/smollm2/cleared_notes.py RUN [RUN ...]

Focused notes clear an update's notes when none of them shares a term with the question
(copied filler). On multi-hop questions a bridge paragraph may name neither the question's
entities nor its answer's kind, so a cleared note could have been a needed hop. For every
traced sample of each `eval run` folder this counts the updates cleared, those whose cleared
notes held a supporting sentence of the question (HotpotQA's `evidence`, most of its words in
the notes) or the gold answer, and the samples where that happened, with how many of those
were answered right (the run's headline metric, as `longread eval compare` counts it).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from longread.agents.memagent import NOTES_UNRELATED
from longread.errors import UsageError
from longread.eval.traced import traced_samples

WORD = re.compile(r"[a-z0-9]{3,}")
# A supporting sentence counts as held when this share of its words is in the cleared notes:
# the update copies sentences nearly verbatim, and a paraphrase keeps most of the words.
HELD_SHARE = 0.7


def words(text: str) -> set[str]:
    """The lower-cased words of three characters or more in ``text``."""
    return set(WORD.findall(text.lower()))


def holds_evidence(notes: str, evidence: list[str], answers: list[str]) -> bool:
    """Whether ``notes`` hold one of the supporting sentences or a gold answer."""
    held = words(notes)
    for sentence in evidence:
        wanted = words(sentence)
        if wanted and len(wanted & held) / len(wanted) >= HELD_SHARE:
            return True
    return any(answer.lower() in notes.lower() for answer in answers if len(answer) > 2)


def count(run_dir: Path) -> dict[str, int]:
    """Updates cleared, those that cleared evidence, and samples with such a clear (right)."""
    out = dict.fromkeys(("traced", "updates", "cleared", "evidence", "samples", "right"), 0)
    for traced in traced_samples(run_dir):
        evidence, answers = traced.sample.meta.get("evidence", []), traced.sample.answers
        updates = [step for step in traced.run.steps if step.kind == "update"]
        cleared = [step for step in updates if NOTES_UNRELATED in step.flags]
        held = [s for s in cleared if holds_evidence(s.reply or "", evidence, answers)]
        out["traced"] += 1
        out["updates"] += len(updates)
        out["cleared"] += len(cleared)
        out["evidence"] += len(held)
        if held:
            out["samples"] += 1
            out["right"] += int(traced.right)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    print("| run | traced | updates | cleared | cleared evidence | samples (right) |")
    print("|---|---:|---:|---:|---:|---:|")
    for run_dir in parser.parse_args().runs:
        try:
            c = count(run_dir)
        except UsageError as exc:
            sys.exit(f"cleared_notes.py: {exc}")
        print(
            f"| {run_dir.name} | {c['traced']} | {c['updates']} | {c['cleared']} "
            f"| {c['evidence']} | {c['samples']} ({c['right']}) |"
        )


if __name__ == "__main__":
    main()
