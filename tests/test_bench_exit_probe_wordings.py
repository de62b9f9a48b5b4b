"""``bench/exit_probe_wordings.py``: the notes each case shows the probe, and its table.

The model calls are not run here (the bench's numbers are measured, not tested); what is
tested is that each case's notes are what its name says, so a "yes" share means what the
table claims."""

from __future__ import annotations

import random

from longread.data._niah import HELDOUT_WORDINGS, WORDINGS

from .script_loader import load_script

bench = load_script("bench/exit_probe_wordings.py")


def test_needle_cases_hold_the_value_and_the_others_never_do() -> None:
    rng = random.Random(0)
    for wording in (*WORDINGS.values(), *HELDOUT_WORDINGS.values()):
        needle, question = bench.needle_and_question(wording, "amber-lantern", "4720519")
        assert "4720519" in needle and "4720519" not in question
        assert "{" not in needle + question  # every field filled
        if wording.keyed:
            assert "amber-lantern" in needle and "amber-lantern" in question
        for _ in range(5):
            notes = {c: bench.notes_for(c, needle, question, "4720519", rng) for c in bench.CASES}
            assert notes["needle"] == needle
            assert notes["needle + filler"].endswith(needle) and notes["needle + filler"] != needle
            assert "4720519" not in notes["made-up"] and notes["made-up"]
            assert "4720519" not in notes["filler"] and notes["filler"] in bench.FILLERS


def row(wording: str, case: str, yes: bool | None, held_out: bool = False) -> dict:
    grounded = case.startswith("needle")
    return {"wording": wording, "case": case, "yes": yes, "held_out": held_out, "keyed": True,
            "grounded": grounded}  # fmt: skip


def test_the_table_counts_yes_by_case_and_what_matches_the_oracle() -> None:
    rows = [
        row("ruler", "needle", True),
        row("ruler", "needle", False),
        row("ruler", "made-up", True),  # the costly error: a yes before the evidence
        row("ruler", "filler", None),  # malformed: not a yes
        row("heldout-ledger", "needle", True, held_out=True),
    ]
    table = bench.summary(rows)
    ruler = next(line for line in table if line.startswith("| ruler "))
    cells = [c.strip() for c in ruler.strip("|").split("|")]
    assert cells[:3] == ["ruler", "yes", "yes"]
    assert cells[3:] == ["1/2", "-", "1/1", "0/1", "1"]
    assert any(line.startswith("| heldout-ledger | held out |") for line in table)
    assert "2 of 5 probes answered as the oracle would." in table
    made_up = next(line for line in table if line.startswith("| made-up |"))
    assert made_up == "| made-up | 1/1 | 0/1 |"  # said yes, not honoured: not grounded


def test_the_grounded_exit_honours_a_yes_to_the_needle_and_not_to_what_was_not_read() -> None:
    """A probe's yes to the needle's notes is an exit with --grounded-exit; a yes to the
    oracle's false claim or to filler is not (the read section holds neither)."""
    rng = random.Random(1)
    needle, question = bench.needle_and_question(WORDINGS["ruler"], "quiet-meadow", "4720519")
    notes = {c: bench.notes_for(c, needle, question, "4720519", rng) for c in bench.CASES}
    verdicts = {case: bench.grounded(question, text, needle) for case, text in notes.items()}
    assert verdicts == {"needle": True, "needle + filler": True, "made-up": False,
                        "filler": False}  # fmt: skip


def test_rows_from_before_the_needle_was_kept_are_rescored_from_their_needle_case() -> None:
    needle, question = bench.needle_and_question(WORDINGS["ruler"], "quiet-meadow", "4720519")
    base = {"wording": "ruler", "index": 0, "question": question, "yes": True}
    made_up = "The number for quiet-meadow is 1234567."
    rows = [{**base, "case": "needle", "notes": needle},
            {**base, "case": "made-up", "notes": made_up}]  # fmt: skip
    assert [r["grounded"] for r in bench.rescored(rows)] == [True, False]
    assert all(r["needle"] == needle for r in rows)
