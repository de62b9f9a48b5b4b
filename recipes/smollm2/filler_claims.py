"""How often an adapter's notes claim something about the asked key before the needle came.

    .venv/bin/python recipes/smollm2/filler_claims.py RUN [RUN ...]

Each RUN is an `eval run` folder of RULER needle samples (e.g. the held-out "before" states,
recipes/smollm2/runs/checks/STAGE-heldout-arrivals-before). For every traced sample it takes
the updates before the needle's sentence was shown (train/rewards.py
``steps_before_evidence``, the steps ``reward.credit_before_evidence = false`` leaves without
credit) and asks whether their notes name the question's key ("sunny-ivory" in "What is the
special magic number for sunny-ivory mentioned in the provided text?"). Filler never names
it, so such notes are a claim made before the evidence: "The special magic number for
sunny-ivory mentioned in the provided text is 11." (stage grpo26b) or "... is no previous
memory" (grpo26c). It prints how many samples had one, how many of those ended in a number,
and the accuracy (the headline metric, RULER's match_all) with and without one. With
`--grounded-notes on` the agent cuts such a claim from the memory (flag `notes_ungrounded`):
the claim is then read from the update's reply, what the model wrote.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from longread.data.evidence import evidence_sentences
from longread.data.records import Sample
from longread.errors import UsageError
from longread.eval.traced import traced_samples
from longread.trace import NOTES_UNGROUNDED, Run, Step
from longread.train.rewards import steps_before_evidence

KEY = re.compile(r"\bfor ([\w-]+)")  # RULER's niah questions: "... number for KEY ..."
CLAIMED_NUMBER = re.compile(r"\bis:? \d")


def claims(run_dir: Path) -> list[tuple[bool, bool, bool]]:
    """(claim before the evidence, the claim holds a number, answered right) per sample."""
    out = []
    for traced in traced_samples(run_dir):
        claim = claim_before_evidence(traced.run, traced.sample)
        if claim is not None:
            out.append((*claim, traced.right))
    return out


def claim_before_evidence(run: Run, sample: Sample) -> tuple[bool, bool] | None:
    """Whether the notes written before the needle was shown name the question's key, and
    whether such notes claim a number for it; None for a question with no RULER key."""
    key = KEY.search(sample.question)
    if key is None:
        return None
    before = run.steps[: steps_before_evidence(run, evidence_sentences(sample))]
    notes = [written_notes(s) for s in before if s.kind == "update"]
    named = [n for n in notes if key.group(1) in n]
    return bool(named), any(CLAIMED_NUMBER.search(n) for n in named)


def written_notes(step: Step) -> str:
    """The notes an update wrote: its memory, or its reply where grounded notes cut a note
    from the memory (what the model claimed, before the cut)."""
    return step.reply if NOTES_UNGROUNDED in step.flags else step.memory or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    for run_dir in parser.parse_args().runs:
        try:
            rows = claims(run_dir)
        except UsageError as exc:
            sys.exit(f"filler_claims.py: {exc}")
        claimed = [r for r in rows if r[0]]
        clean = [r for r in rows if not r[0]]
        print(
            f"{run_dir.name}: {len(claimed)} of {len(rows)} claim the key before the needle "
            f"({sum(r[1] for r in claimed)} with a number); right with a claim "
            f"{sum(r[2] for r in claimed)}/{len(claimed)}, without {sum(r[2] for r in clean)}"
            f"/{len(clean)}"
        )


if __name__ == "__main__":
    main()
