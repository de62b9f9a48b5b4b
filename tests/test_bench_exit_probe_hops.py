"""``bench/exit_probe_hops.py``: the notes each two-hop case shows the probe, and its table.

The model calls are not run here (the bench's numbers are measured); what is tested is that
each case's notes hold the hops its name says, so a "yes" with a hop missing is what the
table calls an early stop."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from .script_loader import load_script

bench = load_script("bench/exit_probe_hops.py")
# eight records of the HotpotQA dev set, all from the evaluation half of the dev sample
EXCERPT = Path(__file__).resolve().parent / "data/hotpotqa_dev_excerpt.json"


@pytest.mark.parametrize("wording", ["train", "heldout"])
def test_chain_cases_hold_exactly_the_hops_their_names_say(wording: str) -> None:
    rng = random.Random(0)
    for _ in range(20):
        question, notes = bench.chain_cases(wording, rng)
        fact, bridge = notes["fact"], notes["bridge"]
        code = next(word.strip(".,") for word in fact.split() if word.strip(".,").isdigit())
        item = next(c for c in bench.COLOURS if f"{c} " in question)
        assert item in bridge and item not in fact  # the fact alone does not name the item
        assert code not in bridge and code not in question
        assert notes["both"] == f"{fact} {bridge}"
        decoy = notes["other fact + bridge"]
        assert decoy.endswith(bridge) and code not in decoy  # another place's code
        assert "{" not in question + decoy + notes["both"]  # every field filled


def test_hotpotqa_cases_are_one_gold_paragraph_then_all_of_its_evidence() -> None:
    cases = bench.hotpotqa_cases(str(EXCERPT), 50)
    assert len(cases) == 8  # every record has two gold paragraphs
    eval_ids = bench.EVAL_IDS.read_text(encoding="utf-8").split()[:50]
    for qid, _question, notes in cases:
        assert qid in eval_ids  # never a question a stage trained on
        first, every = notes["first paragraph"], notes["both paragraphs"]
        assert every.startswith(first) and len(every) > len(first)


def test_the_table_counts_early_stops_as_yes_with_a_hop_missing() -> None:
    def row(case: str, yes: bool | None) -> dict:
        return {"source": "chains train", "case": case, "yes": yes}

    rows = [row("fact", True), row("bridge", False), row("both", True), row("both", None)]
    table = bench.summary(rows)
    assert "| chains train | fact | no | 1/1 | 0 |" in table
    assert "| chains train | both | yes | 1/2 | 1 |" in table
    assert table[-1] == (
        "2 of 4 probes answered as the oracle would; 1 of 2 said yes with a hop missing "
        "(an early stop)."
    )
