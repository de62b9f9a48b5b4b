"""recipes/smollm2/filler_claims.py: the count the campaign quotes on claims made before the
needle (stages grpo26b and grpo26c)."""

import importlib.util
from pathlib import Path

from longread.agents.memagent import NO_MEMORY
from longread.data.records import Sample
from longread.trace import NOTES_UNGROUNDED, Run, Step

SCRIPT = Path(__file__).parent.parent / "recipes" / "smollm2" / "filler_claims.py"
spec = importlib.util.spec_from_file_location("filler_claims", SCRIPT)
filler_claims = importlib.util.module_from_spec(spec)
spec.loader.exec_module(filler_claims)

NEEDLE = "One of the special magic numbers for sunny-ivory is: 6474708."
SAMPLE = Sample(
    "s1",
    "What is the special magic number for sunny-ivory mentioned in the provided text?",
    f"Filler about kettles.\n{NEEDLE}",
    ["6474708"],
    {},
)


def reading(*notes: str) -> Run:
    """A run that read the filler section, then the needle's, writing ``notes`` after each."""
    sections = ["Filler about kettles.", NEEDLE]
    steps = [
        Step(kind="update", step=i, messages=[{"role": "user", "content": f"Section:\n{text}"}],
             reply=n, finish_reason="stop", prompt_tokens=1, completion_tokens=1, seconds=0.0,
             memory=n)
        for i, (text, n) in enumerate(zip(sections, notes, strict=True))
    ]  # fmt: skip
    return Run(agent="memagent", question=SAMPLE.question, answer="", final_reply="",
               boxed=False, steps=steps, seconds=0.0)  # fmt: skip


def test_notes_naming_the_key_before_the_needle_are_a_claim_with_or_without_a_number():
    made_up = "The special magic number for sunny-ivory mentioned in the provided text is 11."
    worded = "The special magic number for sunny-ivory mentioned in the provided text is none."
    assert filler_claims.claim_before_evidence(reading(made_up, NEEDLE), SAMPLE) == (True, True)
    assert filler_claims.claim_before_evidence(reading(worded, NEEDLE), SAMPLE) == (True, False)


def test_the_key_written_at_the_needles_section_is_no_claim():
    assert filler_claims.claim_before_evidence(reading(NO_MEMORY, NEEDLE), SAMPLE) == (
        False,
        False,
    )
    filler = "Kettles dream slowly."
    assert filler_claims.claim_before_evidence(reading(filler, NEEDLE), SAMPLE) == (False, False)


def test_a_claim_that_grounded_notes_cut_from_the_memory_still_counts():
    """With --grounded-notes on, the memory after a claim is "No previous memory" again; the
    model still wrote the claim, which is what the count is about."""
    made_up = "The special magic number for sunny-ivory mentioned in the provided text is 11."
    run = reading(made_up, NEEDLE)
    run.steps[0].memory = NO_MEMORY
    assert filler_claims.claim_before_evidence(run, SAMPLE) == (False, False)  # never flagged
    run.steps[0].flags.append(NOTES_UNGROUNDED)
    assert filler_claims.claim_before_evidence(run, SAMPLE) == (True, True)


def test_a_training_run_is_counted_step_by_step_over_the_rollouts_it_kept(tmp_path):
    """The rollouts the trainer saved (rollouts/step-NNNNNN.jsonl.gz), read back against the
    training data its config.json names, relative to the run folder."""
    import json

    from longread.train.config import TrainConfig
    from longread.train.credit import GroupCredit
    from longread.train.rollouts import Rollouts, rollout_lines
    from longread.train.run_folder import RunFolder

    (tmp_path / "train.jsonl").write_text(json.dumps(SAMPLE.to_dict()) + "\n")
    run_dir = tmp_path / "run"
    config = TrainConfig.from_dict({"data": {"train": [str(tmp_path / "train.jsonl")]}})
    folder = RunFolder(run_dir, config)
    folder.open()
    made_up = "The special magic number for sunny-ivory mentioned in the provided text is 11."
    for step, first in ((1, made_up), (2, NO_MEMORY)):
        runs = [reading(first, NEEDLE), reading(NO_MEMORY, NEEDLE)]
        credit = GroupCredit([1.0, 0.0], [1.0, 0.0], [[0.0] * 2] * 2, False)
        folder.save_rollouts(step, rollout_lines(Rollouts([SAMPLE], [runs], [credit])))

    counts = filler_claims.rollout_claims(run_dir)
    # step 1: the first rollout claimed (with a number) and was right; the second did not
    assert counts == {1: [(True, True, True), (False, False, False)],
                      2: [(False, False, True), (False, False, False)]}  # fmt: skip
