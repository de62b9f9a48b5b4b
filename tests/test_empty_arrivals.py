"""recipes/smollm2/empty_arrivals.py: the GRPO states the next memory stage trains from."""

import importlib.util
import random
from pathlib import Path

from longread.agents.memagent import NO_MEMORY
from longread.data.records import Sample

SCRIPT = Path(__file__).parent.parent / "recipes" / "smollm2" / "empty_arrivals.py"
spec = importlib.util.spec_from_file_location("empty_arrivals", SCRIPT)
empty_arrivals = importlib.util.module_from_spec(spec)
spec.loader.exec_module(empty_arrivals)

SECTIONS = ["Filler one.", "Filler two.", "Filler three.", "The code is 4412.", "Filler five."]
SAMPLE = Sample("s1", "What is the code?", "\n\n".join(SECTIONS), ["4412"], {"task": "t"})


def test_an_arrival_starts_from_empty_notes_at_the_needles_section():
    [arrival] = empty_arrivals.states(SAMPLE, SECTIONS, random.Random(0), before=0.0)
    assert arrival["context"] == "The code is 4412."
    assert arrival["meta"]["memory"] == NO_MEMORY and arrival["meta"]["task"] == "t"
    assert arrival["answers"] == ["4412"] and arrival["question"] == SAMPLE.question


def test_a_before_state_reads_one_or_two_filler_sections_first_and_ends_at_the_needle():
    for seed in range(6):
        _, before = empty_arrivals.states(SAMPLE, SECTIONS, random.Random(seed), before=1.0)
        assert before["context"].endswith("The code is 4412.")
        assert before["context"] in ("\n\n".join(SECTIONS[2:4]), "\n\n".join(SECTIONS[1:4]))
        assert before["meta"]["memory"] == NO_MEMORY and before["id"] != "s1-empty-arrival"


def test_a_gold_cut_across_two_sections_gives_no_state():
    sections = ["Filler. The code is 44", "12. More filler."]
    assert empty_arrivals.states(SAMPLE, sections, random.Random(0), before=1.0) == []


def test_section_first_states_are_rolled_out_in_that_order_under_their_own_ids():
    """The trainer reads ``meta["section_first"]`` per sample, so one file can mix orders."""
    paper = empty_arrivals.states(SAMPLE, SECTIONS, random.Random(0), before=1.0)
    first = empty_arrivals.states(
        SAMPLE, SECTIONS, random.Random(0), before=1.0, section_first=True
    )
    assert [r["meta"]["section_first"] for r in paper + first] == [False, False, True, True]
    assert [r["context"] for r in first] == [r["context"] for r in paper]
    assert not {r["id"] for r in first} & {r["id"] for r in paper}
