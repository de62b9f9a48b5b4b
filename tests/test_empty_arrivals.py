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


ESSAY = (
    "The river ran past the mill all spring. Nobody knew why the old bell rang at noon. "
    "One of the special magic numbers for old-pond is: 9605461. The harvest came late."
)


def test_an_end_state_ends_on_the_needle_after_a_sentence_cut_mid_way():
    """RULER's depth-100% layout: the essay cut to its word budget, then the needle, nothing
    after; the sentences before the cut one are kept whole."""
    needle = "One of the special magic numbers for old-pond is: 9605461."
    for seed in range(8):
        ending = empty_arrivals.ending_at_needle(ESSAY, "9605461", random.Random(seed))
        head, cut = ending.removesuffix(" " + needle), "Nobody knew why the old bell rang at noon."
        assert ending.endswith(needle) and head.startswith(
            "The river ran past the mill all spring. "
        )
        rest = head.removeprefix("The river ran past the mill all spring. ")
        assert rest and cut.startswith(rest) and rest != cut


def test_a_needle_on_a_line_of_its_own_has_no_end_state():
    """Noise haystacks are whole lines at every length: no cut sentence to reproduce."""
    lines = "The grass is green.\nThe sky is blue.\nThe code is 4412.\nThe sun is yellow."
    assert empty_arrivals.ending_at_needle(lines, "4412", random.Random(0)) is None


def test_end_states_come_beside_the_arrival_state_under_their_own_kind():
    sample = Sample("s2", "What is the number?", ESSAY, ["9605461"], {})
    rows = empty_arrivals.states(sample, [ESSAY], random.Random(0), before=0.0, at_end=1.0)
    assert [r["meta"]["state"] for r in rows] == ["arrival", "end"]
    assert rows[1]["context"].endswith("9605461.") and len({r["id"] for r in rows}) == 2


def test_an_id_tag_keeps_ids_apart_from_states_cut_from_the_same_documents():
    """grpo26c trains on before states with seed 28 beside grpo26a's file, which holds before
    states of the same documents: the trainer refuses an id that occurs twice."""
    plain = empty_arrivals.states(SAMPLE, SECTIONS, random.Random(0), before=1.0)
    tagged = empty_arrivals.states(SAMPLE, SECTIONS, random.Random(0), before=1.0, tag="s28")
    assert [r["id"] for r in tagged] == [r["id"] + "-s28" for r in plain]
    assert [r["context"] for r in tagged] == [r["context"] for r in plain]
