"""How often an adapter's notes claim something about the asked key before the needle came.

    .venv/bin/python recipes/smollm2/filler_claims.py RUN [RUN ...]
    .venv/bin/python recipes/smollm2/filler_claims.py recipes/smollm2/runs/grpo26e  # per step

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
the claim is then read from the update's reply, what the model wrote. A RUN that is a GRPO
training run folder (it keeps `rollouts/`) is counted step by step over its rollouts, the
accuracy being the rollouts' own (sampled, not greedy).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from longread.data.evidence import evidence_sentences
from longread.data.records import Sample
from longread.errors import UsageError
from longread.eval.traced import traced_samples
from longread.trace import NOTES_UNGROUNDED, Run, Step
from longread.train.rewards import steps_before_evidence

ROLLOUTS = "rollouts"  # a GRPO run folder's rollouts (longread.train.run_folder.ROLLOUTS)
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


def rollout_claims(run_dir: Path) -> dict[int, list[tuple[bool, bool, bool]]]:
    """As :func:`claims`, per step of a GRPO training run, over the rollouts it kept."""
    # The trainer's modules import torch (the train extra): only a training run needs them.
    from longread.train.run_folder import read_rollouts
    from longread.train.runconfig import absolute_paths
    from longread.train.session import load_data

    config = json.loads((run_dir / "config.json").read_text())
    paths = absolute_paths(config, run_dir)["data"]["train"]
    samples = {sample.id: sample for sample in load_data(paths, "training")}
    out: dict[int, list[tuple[bool, bool, bool]]] = {}
    for path in sorted((run_dir / ROLLOUTS).glob("step-*.jsonl.gz")):
        step = int(path.name.split(".")[0].split("-")[1])
        out[step] = []
        for line in read_rollouts(run_dir, step):
            run = Run.from_dict(line["run"])
            claim = claim_before_evidence(run, samples[line["sample_id"]])
            if claim is not None:
                out[step].append((*claim, bool(line["correct"])))
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
            if (run_dir / ROLLOUTS).is_dir():
                for step, rows in rollout_claims(run_dir).items():
                    print(summary(f"{run_dir.name} step {step}", rows))
            else:
                print(summary(run_dir.name, claims(run_dir)))
        except UsageError as exc:
            sys.exit(f"filler_claims.py: {exc}")


def summary(name: str, rows: list[tuple[bool, bool, bool]]) -> str:
    """One line: how many claim (with a number), and the accuracy with and without a claim."""
    claimed = [r for r in rows if r[0]]
    clean = [r for r in rows if not r[0]]
    return (
        f"{name}: {len(claimed)} of {len(rows)} claim the key before the needle "
        f"({sum(r[1] for r in claimed)} with a number); right with a claim "
        f"{sum(r[2] for r in claimed)}/{len(claimed)}, without {sum(r[2] for r in clean)}"
        f"/{len(clean)}"
    )


if __name__ == "__main__":
    main()
